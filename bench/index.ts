/**
 * `npm run bench`: every benchmark in turn, each printing ratios against a peer measured in the same run.
 */
import * as AggregatesIncremental from "./aggregates/incremental.js"
import * as Jwt from "./auth/jwt.js"
import * as FlagsDistribution from "./flags/distribution.js"
import * as FlagsEvaluate from "./flags/evaluate.js"
import * as FlagsGated from "./flags/gated.js"
import * as FlagsOpenFeature from "./flags/openfeature.js"
import * as Fleet from "./fleet/fleet.js"
import * as History from "./history.js"
import * as RateLimit from "./http/rateLimit.js"
import * as Rest from "./http/rest.js"
import * as RestInProcess from "./http/restInProcess.js"
import * as Sse from "./http/sse.js"
import * as Rpc from "./rpc.js"
import * as SamlAcs from "./saml/acs.js"
import * as SamlLimits from "./saml/limits.js"
import * as Standing from "./standing/inserts.js"
import * as SearchInsert from "./search/insert.js"
import * as SearchMemory from "./search/memory.js"
import * as SearchReindex from "./search/reindex.js"
import * as SearchSqlPg from "./search/sqlPg.js"
import * as Store from "./store/store.js"
import * as StoreMemoryReads from "./store/memoryReads.js"
import * as StorePointRead from "./store/pointRead.js"
import * as StoreSingle from "./store/single.js"

await Store.run()
await StorePointRead.run()
await StoreMemoryReads.run()
await StoreSingle.run()
await Rpc.run()
await Rest.run()
await RestInProcess.run()
await RateLimit.run()
await Sse.run()
await History.run()
await Fleet.run()
await Jwt.run()
await SamlAcs.run()
await SamlLimits.run()
await FlagsEvaluate.run()
await FlagsDistribution.run()
await FlagsGated.run()
await FlagsOpenFeature.run()
await Standing.run()
await SearchMemory.run()
await SearchInsert.run()
await SearchSqlPg.run()
await SearchReindex.run()
await AggregatesIncremental.run()
