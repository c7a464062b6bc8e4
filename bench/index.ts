/**
 * `npm run bench`: every benchmark in turn, each printing ratios against a peer measured in the same run.
 */
import * as History from "./history.js"
import * as Jwt from "./jwt.js"
import * as Rest from "./rest.js"
import * as Rpc from "./rpc.js"
import * as Sse from "./sse.js"
import * as Store from "./store/store.js"

await Store.run()
await Rpc.run()
await Rest.run()
await Sse.run()
await History.run()
await Jwt.run()
