/**
 * Serves plugin `Route`s on a plain `HttpLayerRouter` (NodeHttpServer, 127.0.0.1, port 0), without
 * the app server: each handler gets its route params, the anonymous caller, a body cap, the given
 * Store and a fetch HttpClient, and reads `Config` from the ConfigProvider `config` returns for
 * that request.
 */
import { FetchHttpClient, HttpClient, HttpLayerRouter, HttpRouter, HttpServer, HttpServerRequest } from "@effect/platform"
import type { HttpServerError } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import type { ConfigProvider, Scope } from "effect"
import { Context, Effect, Layer, Logger } from "effect"
import { createServer } from "node:http"
import * as BodyRead from "../../../src/app/BodyRead.js"
import * as ByteStream from "../../../src/app/ByteStream.js"
import * as Plugin from "../../../src/app/Plugin.js"
import * as BodyLimit from "../../../src/http/BodyLimit.js"
import { Store } from "../../../src/kernel/store/Store.js"
import * as Subject from "../../../src/kernel/Subject.js"
import { capture } from "../../support/Serve.js"

/** Serves `routes` until the scope closes; returns the base URL. */
export const serveRoutes = <E>(
  routes: ReadonlyArray<Plugin.Route>,
  options: {
    readonly store: Layer.Layer<Store, E>
    readonly config: () => ConfigProvider.ConfigProvider
    /** Where the handlers' logs go (`LEVEL message`), instead of the test output. */
    readonly logs?: Array<string>
  }
): Effect.Effect<string, E | HttpServerError.ServeError, Scope.Scope> =>
  Effect.gen(function*() {
    const mounted = HttpLayerRouter.use((router) =>
      Effect.gen(function*() {
        const store = yield* Store
        const client = yield* HttpClient.HttpClient
        for (const route of routes) {
          yield* router.add(
            route.method,
            route.path,
            Effect.gen(function*() {
              const params = yield* HttpRouter.params
              const defined = Object.fromEntries(
                Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined)
              )
              const request = yield* HttpServerRequest.HttpServerRequest
              const result = yield* route.handler.pipe(
                Effect.provideService(Store, store),
                Effect.provideService(HttpClient.HttpClient, client),
                Effect.provideService(Plugin.RouteParams, defined),
                Effect.provideService(Plugin.BodyLimit, route.maxBodyBytes ?? 8 * 1024 * 1024),
                Effect.provideService(BodyRead.BodyReader, BodyLimit.readCapped),
                Effect.provideService(Subject.CurrentSubject, Subject.anonymous),
                Effect.withConfigProvider(options.config())
              )
              return ByteStream.toResponse(result, request.method)
            })
          )
        }
      })
    )
    const context = yield* Layer.build(
      HttpLayerRouter.serve(mounted, { disableLogger: true, disableListenLog: true }).pipe(
        Layer.provide(options.store),
        Layer.provide(FetchHttpClient.layer),
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
      )
    ).pipe(options.logs === undefined ? (built) => built : Effect.provide(Logger.replace(Logger.defaultLogger, capture(options.logs))))
    const { address } = Context.get(context, HttpServer.HttpServer)
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
    return `http://127.0.0.1:${address.port}`
  })
