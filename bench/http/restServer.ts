/** The server of the REST benchmark: the routes of `restApp.ts` on one listener. Prints its port. */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import * as Server from "../../src/server/Server.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import { app, bare } from "./restApp.js"

Layer.launch(Layer.mergeAll(
  Server.layer(app, { routes: bare, announce: false }),
  Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
    if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
  }))
).pipe(
  Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
  Layer.provide(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
)).pipe(NodeRuntime.runMain)
