/**
 * `npm run bench`: every benchmark in turn, each printing ratios against a peer measured in the same run.
 * `BENCH_ONLY=search/sync,store/store npm run bench` runs only the named ones (their paths under
 * `bench/` without `.ts`); each can also run alone, as `npx tsx bench/<path>.ts`.
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
import * as SearchSync from "./search/sync.js"
import * as SearchSqlPg from "./search/sqlPg.js"
import * as Store from "./store/store.js"
import * as StoreMemoryReads from "./store/memoryReads.js"
import * as StorePointRead from "./store/pointRead.js"
import * as StoreSingle from "./store/single.js"

const benches: ReadonlyArray<readonly [string, () => Promise<unknown>]> = [
  ["store/store", Store.run],
  ["store/pointRead", StorePointRead.run],
  ["store/memoryReads", StoreMemoryReads.run],
  ["store/single", StoreSingle.run],
  ["rpc", Rpc.run],
  ["http/rest", Rest.run],
  ["http/restInProcess", RestInProcess.run],
  ["http/rateLimit", RateLimit.run],
  ["http/sse", Sse.run],
  ["history", History.run],
  ["fleet/fleet", Fleet.run],
  ["auth/jwt", Jwt.run],
  ["saml/acs", SamlAcs.run],
  ["saml/limits", SamlLimits.run],
  ["flags/evaluate", FlagsEvaluate.run],
  ["flags/distribution", FlagsDistribution.run],
  ["flags/gated", FlagsGated.run],
  ["flags/openfeature", FlagsOpenFeature.run],
  ["standing/inserts", Standing.run],
  ["search/memory", SearchMemory.run],
  ["search/insert", SearchInsert.run],
  ["search/sqlPg", SearchSqlPg.run],
  ["search/reindex", SearchReindex.run],
  ["search/sync", SearchSync.run],
  ["aggregates/incremental", AggregatesIncremental.run]
]

const only = process.env.BENCH_ONLY?.split(",").map((name) => name.trim())
const unknown = only?.filter((name) => !benches.some(([known]) => known === name)) ?? []
if (unknown.length > 0) throw new Error(`BENCH_ONLY: no benchmark named ${unknown.join(", ")} (known: ${benches.map(([name]) => name).join(", ")})`)
for (const [name, run] of benches) if (only === undefined || only.includes(name)) await run()
