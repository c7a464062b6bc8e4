/** The server side of the SSE fan-out benchmark: one live query projected as SSE, and a mutation. Prints the port. */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { createServer } from "node:http"
import { defineApp } from "../src/app/App.js"
import { mutation, query } from "../src/app/Procedure.js"
import * as Server from "../src/app/Server.js"
import * as ChangeTap from "../src/kernel/ChangeTap.js"
import * as Store from "../src/kernel/Store.js"
import { defineTable } from "../src/kernel/Table.js"

const Ticks = defineTable("ticks", { fields: { n: Schema.Number } })
const latest = query("ticks.latest", {
  input: Schema.Struct({}),
  output: Schema.Number,
  publicApi: { stream: "sse" },
  handler: (_, { store }) => Effect.map(store.find(Ticks, { orderBy: "n", direction: "desc", limit: 1 }), (rows) => rows[0]?.n ?? 0)
})
const tick = mutation("ticks.add", {
  input: Schema.Struct({ n: Schema.Number }),
  output: Schema.Number,
  publicApi: {},
  handler: ({ n }, { store }) => Effect.as(store.insert(Ticks, { n }), n)
})
const app = defineApp({ tables: [Ticks], procedures: [latest, tick] })

Layer.launch(Layer.mergeAll(
  Server.layer(app),
  Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
    if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
  }))
).pipe(
  Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
  Layer.provide(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1", backlog: 2048 }))
)).pipe(NodeRuntime.runMain)
