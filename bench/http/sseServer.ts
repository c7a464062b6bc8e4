/**
 * The server of the SSE fan-out benchmark: one live query projected as SSE (`GET /v1/ticks/latest`),
 * a projected mutation (`POST /v1/ticks/add`), and a bare SSE route that forwards every committed
 * change from the change tap with no query re-run (the floor). Prints its port.
 */
import { HttpLayerRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, PubSub, Schema, Stream } from "effect"
import { writeFileSync } from "node:fs"
import { createServer } from "node:http"
import { Session } from "node:inspector/promises"
import * as path from "node:path"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import * as Server from "../../src/server/Server.js"
import * as Sse from "../../src/http/Sse.js"
import type { ChangeEvent } from "../../src/kernel/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import { defineTable } from "../../src/kernel/Table.js"

const Ticks = defineTable("ticks", { fields: { n: Schema.Number } })
const latest = query("ticks.latest", {
  input: Schema.Struct({}),
  output: Schema.Number,
  publicApi: { stream: "sse" },
  handler: (_, { store }) => Effect.map(store.find(Ticks, { orderBy: "n", direction: "desc", limit: 1 }), (rows) => rows[0]?.n ?? 0)
})
const add = mutation("ticks.add", {
  input: Schema.Struct({ n: Schema.Number }),
  output: Schema.Number,
  publicApi: {},
  handler: ({ n }, { store }) => Effect.as(store.insert(Ticks, { n }), n)
})
const app = defineApp({ name: "sse-bench", tables: [Ticks], procedures: [latest, add] })

/**
 * With `SSE_PROF_DIR` set: `POST /bench/profile/start` and `/bench/profile/stop?name=...` profile the
 * server's CPU between the two calls (the commits, not the connection setup) into that folder.
 */
const profiling = HttpLayerRouter.use((router) =>
  Effect.gen(function*() {
    const dir = process.env["SSE_PROF_DIR"]
    if (dir === undefined) return
    const session = new Session()
    session.connect()
    yield* router.add("POST", "/bench/profile/start", Effect.promise(async () => {
      await session.post("Profiler.enable")
      await session.post("Profiler.start")
      return HttpServerResponse.empty()
    }))
    yield* router.add("POST", "/bench/profile/stop", Effect.flatMap(HttpServerRequest.ParsedSearchParams, (params) =>
      Effect.promise(async () => {
        const { profile } = await session.post("Profiler.stop")
        writeFileSync(path.join(dir, `${String(params["name"] ?? "phase")}.cpuprofile`), JSON.stringify(profile))
        return HttpServerResponse.empty()
      })))
  })
)

/** Every committed change, framed as SSE, with no query re-run and no guards. */
const bare = HttpLayerRouter.use((router) =>
  Effect.gen(function*() {
    const tap = yield* ChangeTap.ChangeTap
    const hub = yield* PubSub.unbounded<ChangeEvent>()
    yield* tap.subscribe({ name: "bench-bare-sse", onEvent: (event) => PubSub.publish(hub, event) })
    yield* router.add(
      "GET",
      "/bare/ticks",
      Effect.map(PubSub.subscribe(hub), (events) =>
        HttpServerResponse.stream(
          Sse.body(Stream.concat(
            Stream.succeed(Sse.sseFrame("snapshot", { data: 0 })),
            Stream.fromQueue(events).pipe(Stream.map((event) => Sse.sseFrame("delta", { data: event.after?.["n"] ?? null })))
          )),
          { contentType: "text/event-stream", headers: Sse.headers }
        ))
    )
  })
)

Layer.launch(Layer.mergeAll(
  Server.layer(app, { routes: Layer.mergeAll(bare, profiling), announce: false }),
  Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
    if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
  }))
).pipe(
  Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
  Layer.provide(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1", backlog: 4096 }))
)).pipe(NodeRuntime.runMain)
