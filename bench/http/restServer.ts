/**
 * The server of the REST benchmark: the routes of `restApp.ts` on one listener. Prints its port.
 * With `FW_BENCH_TRACER=1` a pass-through tracer is installed, so every request gets its span (as
 * an app exporting traces would).
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Tracer } from "effect"
import { createServer } from "node:http"
import * as NodeServer from "../../src/server/NodeServer.js"
import * as Server from "../../src/server/Server.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import { app, bare } from "./restApp.js"

const passThrough = Effect.runSync(Effect.map(Effect.tracer, (native) => Tracer.make({ span: (...args) => native.span(...args), context: native.context })))

Layer.launch(Layer.mergeAll(
  Server.layer(app, { routes: bare, announce: false }),
  Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
    if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
  }))
).pipe(
  Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
  Layer.provide(process.env.FW_BENCH_PLATFORM === "1"
    ? Layer.orDie(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    : NodeServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
  Layer.provide(process.env.FW_BENCH_TRACER === "1" ? Layer.setTracer(passThrough) : Layer.empty)
)).pipe(NodeRuntime.runMain)
