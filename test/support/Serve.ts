/**
 * Serves an app on 127.0.0.1 (random port) for the duration of a scope, and connects clients to it.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import type { Scope } from "effect"
import { Context, Effect, Layer } from "effect"
import { createServer } from "node:http"
import type { App } from "../../src/app/App.js"
import * as Server from "../../src/server/Server.js"
import * as Client from "../../src/client/Client.js"
import type { ChangeTap } from "../../src/kernel/ChangeTap.js"
import type { Store } from "../../src/kernel/Store.js"

/** Where a served app listens. */
export interface Served {
  readonly url: string
  readonly rpcUrl: string
  readonly wsUrl: string
}

/** Serves `app` over `storeLayer` until the scope closes (on `port`; by default a free one). */
export const serve = <E>(
  app: App,
  storeLayer: Layer.Layer<Store | ChangeTap, E>,
  options: Server.Options = {},
  port = 0
): Effect.Effect<Served, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      Server.layer(app, { announce: false, ...options }).pipe(
        Layer.provide(storeLayer),
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" }))
      )
    )
    const { address } = Context.get(context, HttpServer.HttpServer)
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
    const url = `http://127.0.0.1:${address.port}`
    return { url, rpcUrl: `${url}/rpc`, wsUrl: `ws://127.0.0.1:${address.port}/rpc` }
  })

/** A client over `POST /rpc`. */
export const httpClient = (served: Served, app: App): Effect.Effect<Client.Client, never, Scope.Scope> =>
  Client.connect(app.procedures.values(), Client.layerHttp(served.rpcUrl))

/** A client over one WebSocket. */
export const wsClient = (served: Served, app: App): Effect.Effect<Client.Client, never, Scope.Scope> =>
  Client.connect(app.procedures.values(), Client.layerWebSocket(served.wsUrl))
