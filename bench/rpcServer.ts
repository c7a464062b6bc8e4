/**
 * The server side of the rpc benchmark, run in its own process: the fw app (rpc on /rpc, the query
 * guarded by a scope) and a bare HttpLayerRouter route doing the same work (decode the input, read
 * the store, encode the output), on one listener, served by `NodeServer` (`FW_BENCH_PLATFORM=1`:
 * the platform's `NodeHttpServer`, for comparison). Prints the port.
 */
import { HttpLayerRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { createServer } from "node:http"
import * as AuthStrategy from "../src/app/AuthStrategy.js"
import { defineApp } from "../src/app/App.js"
import { requireScope } from "../src/app/Guard.js"
import { query } from "../src/app/Procedure.js"
import * as NodeServer from "../src/server/NodeServer.js"
import * as Server from "../src/server/Server.js"
import * as ChangeTap from "../src/kernel/changes/ChangeTap.js"
import * as Store from "../src/kernel/store/Store.js"
import * as Subject from "../src/kernel/Subject.js"
import { defineTable } from "../src/kernel/schema/Table.js"

const Items = defineTable("items", { fields: { tenantId: Schema.String, name: Schema.String, price: Schema.Number }, tenantField: "tenantId" })
const Input = Schema.Struct({ id: Schema.String })
const Output = Schema.NullOr(Items.schema)
const subject = Subject.make({ type: "user", id: "bench", tenantId: "t1", scopes: ["items:read"] })

const getItem = query("items.get", {
  input: Input,
  output: Output,
  guards: [requireScope("items:read")],
  handler: ({ id }, { store }) => Effect.map(store.get(Items, id), (row) => row._tag === "Some" ? row.value : null)
})
const bearer: AuthStrategy.AuthStrategy = {
  id: "bench",
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.succeed(headers["authorization"] === "Bearer bench" ? AuthStrategy.Verdict.Authenticated({ subject }) : AuthStrategy.Verdict.NoMatch())
}
const app = defineApp({ tables: [Items], procedures: [getItem], auth: [bearer] })

const decodeInput = Schema.decodeUnknown(Schema.parseJson(Input))
const encodeOutput = Schema.encode(Output)
const bare = HttpLayerRouter.use((router) =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    yield* router.add(
      "POST",
      "/bare",
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const input = yield* Effect.flatMap(request.text, decodeInput)
        const row = yield* store.get(Items, input.id).pipe(Subject.actingAs(subject))
        const output = yield* encodeOutput(row._tag === "Some" ? row.value : null)
        return HttpServerResponse.unsafeJson(output)
      }).pipe(Effect.orElseSucceed(() => HttpServerResponse.empty({ status: 400 })))
    )
  })
)

const seed = Layer.effectDiscard(Effect.flatMap(Store.Store, (store) => store.insert(Items, { id: "i1", tenantId: "t1", name: "apple", price: 3 })))

const Main = Layer.mergeAll(
  Server.layer(app, { routes: bare, announce: false }),
  seed,
  Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
    if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
  }))
).pipe(
  Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
  Layer.provide(process.env.FW_BENCH_PLATFORM === "1"
    ? Layer.orDie(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    : NodeServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
)

Layer.launch(Main).pipe(NodeRuntime.runMain)
