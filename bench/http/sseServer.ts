/**
 * The server of the SSE fan-out benchmark: one live query projected as SSE (`GET /v1/ticks/latest`),
 * a projected mutation (`POST /v1/ticks/add`), and the floor: a plain `node:http` listener in the
 * same process whose streams get every committed change of another table (`POST /v1/floorTicks/add`,
 * through the same store and change tap) as a preformatted delta frame written synchronously to
 * every socket, with no query re-run, no guard and no fiber per subscriber. The floor's port is
 * answered by `GET /bench/floor`. Prints its port.
 *
 * Served by fw's Node adapter (`NodeServer`, what `fw serve` runs); `FW_BENCH_PLATFORM=1` serves
 * with the platform's `NodeHttpServer` instead.
 */
import { HttpLayerRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Queue, Schema } from "effect"
import { writeFileSync } from "node:fs"
import * as Http from "node:http"
import { createServer } from "node:http"
import { Session } from "node:inspector/promises"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import * as NodeServer from "../../src/server/NodeServer.js"
import * as Server from "../../src/server/Server.js"
import * as Sse from "../../src/http/Sse.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

const Ticks = defineTable("ticks", { fields: { n: Schema.Number } })
const FloorTicks = defineTable("floorTicks", { fields: { n: Schema.Number } })
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
const addFloor = mutation("floorTicks.add", {
  input: Schema.Struct({ n: Schema.Number }),
  output: Schema.Number,
  publicApi: {},
  handler: ({ n }, { store }) => Effect.as(store.insert(FloorTicks, { n }), n)
})
const app = defineApp({ name: "sse-bench", tables: [Ticks, FloorTicks], procedures: [latest, add, addFloor] })

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

/**
 * The floor: a bare `node:http` SSE listener fed from the change tap's queue (as the live groups
 * are), writing each `floorTicks` change as one preformatted frame to every open response in one
 * synchronous pass. What is left is the commit, the change delivery, one write per socket and the
 * clients.
 */
const floor = HttpLayerRouter.use((router) =>
  Effect.gen(function*() {
    const tap = yield* ChangeTap.ChangeTap
    const open = new Set<Http.ServerResponse>()
    let sequence = 1
    const listener = Http.createServer((request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream", ...Sse.headers })
      response.write(Sse.retryFrame() + Sse.sseFrame("snapshot", { data: 0 }, "1"))
      open.add(response)
      request.once("close", () => open.delete(response))
    })
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => void listener.listen(0, "127.0.0.1", 4096, () => resume(Effect.void))),
      () => Effect.sync(() => listener.close())
    )
    const port = (listener.address() as AddressInfo).port
    const events = yield* tap.events
    yield* Queue.take(events).pipe(
      Effect.flatMap((event) => Effect.sync(() => {
        if (event.table !== FloorTicks.name) return
        sequence += 1
        const frame = Sse.encode(Sse.sseFrame("delta", { data: event.after?.["n"] ?? null }, String(sequence)))
        for (const response of open) response.write(frame)
      })),
      Effect.forever,
      Effect.forkScoped
    )
    yield* router.add("GET", "/bench/floor", Effect.succeed(HttpServerResponse.unsafeJson({ port })))
  })
)

// The two listeners' boot errors differ (`ServeError`, `ListenFailed`): a bench only needs one type.
const serverLayer: typeof NodeServer.layer = process.env["FW_BENCH_PLATFORM"] === "1"
  ? (evaluate, options) => Layer.orDie(NodeHttpServer.layer(evaluate, options))
  : NodeServer.layer

Layer.launch(Layer.mergeAll(
  Server.layer(app, { routes: Layer.mergeAll(floor, profiling), announce: false }),
  Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
    if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
  }))
).pipe(
  Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
  Layer.provide(serverLayer(createServer, { port: 0, host: "127.0.0.1", backlog: 4096 }))
)).pipe(NodeRuntime.runMain)
