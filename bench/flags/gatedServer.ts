/**
 * The server side of the gatedBy benchmark (`gatedApp.ts`), run in its own process. Prints the port.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import * as Server from "../../src/server/Server.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import { app, seed } from "./gatedApp.js"

const Main = Layer.mergeAll(
  Server.layer(app, { announce: false }),
  seed,
  Layer.effectDiscard(Effect.flatMap(HttpServer.HttpServer, (server) =>
    Effect.sync(() => console.log(`PORT ${server.address._tag === "TcpAddress" ? server.address.port : 0}`))))
).pipe(
  Layer.provide(Store.layerMemory),
  Layer.provide(ChangeTap.layerLocal),
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
)

Layer.launch(Main).pipe(NodeRuntime.runMain)
