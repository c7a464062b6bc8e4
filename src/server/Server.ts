/**
 * Serving an app: one `HttpLayerRouter` listener with rpc at `/rpc` (WebSocket upgrade on GET,
 * `POST /rpc` over HTTP), the OpenAPI document, plugin routes and the inspect surface.
 *
 * ```ts
 * const Main = Server.layer(app).pipe(
 *   Layer.provide(Store.layerSql),
 *   Layer.provide(ChangeTap.layerLocal),
 *   Layer.provide(SqliteClient.layer({ filename: "app.db" })),
 *   Layer.provide(NodeServer.layer(BootServer.createServer, { port: 3000 })))
 * Layer.launch(Main).pipe(NodeServer.runMain)
 * ```
 */
import { HttpServer as HttpServerModule } from "@effect/platform"
import type { HttpServer } from "@effect/platform"
import {
  FetchHttpClient,
  HttpClient,
  HttpLayerRouter,
  HttpRouter,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { RpcSerialization, RpcServer } from "@effect/rpc"
import { Cause, Console, Context, Effect, Either, Layer } from "effect"
import * as BodyLimit from "../http/BodyLimit.js"
import * as Http from "../http/Http.js"
import * as Dashboard from "../inspect/Dashboard.js"
import * as DataBrowser from "../inspect/DataBrowser.js"
import * as Inspect from "../inspect/Inspect.js"
import { ChangeTap } from "../kernel/changes/ChangeTap.js"
import { Store } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import type { App } from "../app/App.js"
import * as HttpResponses from "../app/HttpResponses.js"
import type { TableNotDeclared } from "../kernel/Errors.js"
import { StoreWriteDenied } from "../kernel/Errors.js"
import * as Plugin from "../app/Plugin.js"
import * as BodyRead from "../app/BodyRead.js"
import * as ByteStream from "../app/ByteStream.js"
import * as CrossSite from "../app/CrossSite.js"
import * as DeclaredTables from "../app/DeclaredTables.js"
import * as PluginServices from "../app/PluginServices.js"
import type * as Settings from "../app/Settings.js"
import * as DirectRoute from "../app/DirectRoute.js"
import * as Cors from "./Cors.js"
import * as Dispatch from "./Dispatch.js"
import * as FrameCap from "./FrameCap.js"
import * as NotFound from "./NotFound.js"
import * as PluginHost from "./PluginHost.js"
import * as RpcGroup from "../app/RpcGroup.js"
import * as Rpc from "./Rpc.js"
import * as RpcHttp from "./RpcHttp.js"
import * as RpcPlain from "./RpcPlain.js"
import * as RpcProtocol from "./RpcProtocol.js"
import * as RpcSocket from "./RpcSocket.js"
import * as RequestTracing from "./RequestTracing.js"
import * as Runtime from "../app/Runtime.js"
import * as SchemaApply from "./SchemaApply.js"

/** Serving options. */
export interface Options {
  /** Apply the declared schema to a SQL store at boot (what `fw dev` does). Default false. */
  readonly applySchema?: boolean
  /** Log every request. Default false. */
  readonly logRequests?: boolean
  /**
   * Print `fw: serving <app> on http://host:port (docs at /docs)` once listening. Default true;
   * tests and embedding programs turn it off.
   */
  readonly announce?: boolean
  /**
   * Serve as in production: the procedures' OpenAPI document (`/rpc/openapi.json`) only when the
   * app opts in (`openApi.procedures: "always"`). Default: whether `NODE_ENV` is `production`;
   * `fw serve` sets it unless `NODE_ENV` names another environment, `fw dev` clears it.
   */
  readonly production?: boolean
  /** Extra `HttpLayerRouter` routes served on the same listener (health checks, webhooks, ...). */
  readonly routes?: Layer.Layer<never, never, HttpLayerRouter.HttpRouter | Store | ChangeTap>
}

/** The path of both rpc transports. */
export const rpcPath = "/rpc"

/**
 * The WebSocket rpc protocol on `GET /rpc`, its upgrade screened by `CrossSite` (a cross-site
 * upgrade does not carry its cookies into the socket, whose every call reuses the upgrade headers).
 */
const websocketProtocol = (maxBodyBytes: number, knownTags: ReadonlySet<string>) =>
  Layer.effect(
    RpcServer.Protocol,
    Effect.gen(function*() {
      const router = yield* HttpLayerRouter.HttpRouter
      const runtime = yield* Runtime.Runtime
      const { httpApp, protocol } = yield* RpcSocket.make(runtime, knownTags, maxBodyBytes)
      // A plain GET (a browser opening the URL) gets the JSON error shape, not an empty 400; an
      // upgrade's frames are capped like every other body (1009 past the cap).
      const upgradeOnly = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        request.headers["upgrade"]?.toLowerCase() === "websocket"
          ? Effect.provideService(httpApp, HttpServerRequest.HttpServerRequest, FrameCap.capped(request, maxBodyBytes))
          : Effect.succeed(HttpResponses.error(
            400,
            "UpgradeRequired",
            `GET ${rpcPath} is the rpc WebSocket: send Upgrade: websocket, or call procedures with POST ${rpcPath}`
          )))
      yield* router.add("GET", rpcPath, CrossSite.guarded(runtime, upgradeOnly))
      return protocol
    })
  )

/**
 * Both rpc transports: the WebSocket upgrade on `GET /rpc` (the `@effect/rpc` server, answering
 * unknown tags with a typed error), and `POST /rpc` answered by `RpcHttp` within the body cap;
 * with plain JSON calls on `POST /rpc/<tag>` (`RpcPlain`).
 */
const rpcRoutes = (serverGroup: RpcGroup.Group, maxBodyBytes: number, knownTags = new Set(serverGroup.requests.keys())) =>
  Layer.mergeAll(
    RpcServer.layer(serverGroup, { disableTracing: true }).pipe(
      Layer.provide(RpcProtocol.layerGuarded(websocketProtocol(maxBodyBytes, knownTags), knownTags))
    ),
    HttpLayerRouter.use((router) =>
      Effect.gen(function*() {
        const runtime = yield* Runtime.Runtime
        // Direct dispatch (see `DirectRoute`) skips the router's per-request context for every call.
        yield* router.add("POST", rpcPath, yield* RpcHttp.route(runtime, maxBodyBytes))
        // Plain JSON calls: `POST /rpc/<tag>` (a tag may hold any character a path segment can).
        const plain = RpcPlain.make(runtime, maxBodyBytes)
        yield* router.add("POST", `${RpcPlain.pathPrefix}*`, Effect.flatMap(HttpServerRequest.HttpServerRequest, plain))
      })
    )
  )

/** A plugin's GET route may be opened from a link on another site; its store then refuses writes. */
const navigable: CrossSite.Options = { navigable: true }

/** Mounts one plugin's routes and inspect routes, each running with the plugin's narrowed services. */
const pluginRoutes = (plugin: Plugin.Plugin, maxBodyBytes: number) =>
  HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const runtime = yield* Runtime.Runtime
      const services = PluginServices.services(plugin, yield* Store, yield* HttpClient.HttpClient)
      // What a route runs with on a request admitted only as another site's navigation: no writes.
      const navigationServices = Context.add(services, Store, PluginServices.readOnlyStore(Context.get(services, Store), CrossSite.navigationWrite))
      const mount = (route: Plugin.Route, path: `/${string}`, inspect: boolean) => {
        // Inspect routes run as the operator the gate admitted (`Inspect.gatedWith`).
        const handler = (operator: Subject.Subject | undefined) => Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const resolved = operator !== undefined
            ? Either.right(operator)
            : route.anonymous === true
            ? Either.right(Subject.anonymous)
            : yield* Effect.either(runtime.resolveSubject(request.headers))
          if (Either.isLeft(resolved)) return HttpResponses.error(401, "Unauthenticated", resolved.left.reason)
          const params = yield* HttpRouter.params
          const defined = Object.fromEntries(
            Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined)
          )
          const result = yield* route.handler.pipe(
            // Anonymous routes (an IdP's redirect back) read their own cookies and defend themselves.
            Effect.provide(
              route.anonymous !== true && CrossSite.viaNavigation(request.method, request.headers, runtime.app.trustedOrigins)
                ? navigationServices
                : services
            ),
            Effect.provideService(Plugin.RouteParams, defined),
            Effect.provideService(Plugin.BodyLimit, route.maxBodyBytes ?? maxBodyBytes),
            Effect.provideService(BodyRead.BodyReader, BodyLimit.readCapped),
            Effect.provideService(Subject.CurrentSubject, resolved.right)
          )
          return ByteStream.toResponse(result, request.method)
        }).pipe(
          Effect.catchIf(
            (error): error is BodyLimit.PayloadTooLarge => error instanceof BodyLimit.PayloadTooLarge,
            (error) => Effect.succeed(BodyLimit.payloadTooLargeResponse(error))
          ),
          // A write refused by the read-only store of another site's navigation is the caller's 403.
          Effect.catchIf(
            (error): error is StoreWriteDenied => error instanceof StoreWriteDenied,
            (error) => Effect.succeed(HttpResponses.error(403, "StoreWriteDenied", error.message))
          ),
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : Effect.logError(`plugin "${plugin.name}" route ${route.method} ${path} failed`, cause).pipe(
              Effect.as(HttpResponses.error(500, "InternalError", "internal error"))
            )
          )
        )
        // Anonymous routes (logins, IdP callbacks) read their own cookies and defend themselves; the
        // inspect gate screens cookies itself and checks the route's capability, whatever its path.
        return router.add(
          route.method,
          path,
          inspect
            ? Inspect.gatedWith(runtime, route.capability, handler)
            : route.anonymous === true
            ? handler(undefined)
            : CrossSite.guarded(runtime, handler(undefined), navigable)
        )
      }
      for (const route of plugin.routes ?? []) yield* mount(route, route.path, false)
      for (const route of plugin.inspectRoutes ?? []) {
        // Validated at boot (PluginHost.validate): the path is the plugin's to take.
        yield* mount(route, Plugin.inspectPath(plugin.name, route.path) ?? `${Inspect.prefix}/plugins/${plugin.name}${route.path}`, true)
      }
    })
  )

/** A 200 `ok` at `GET /_fw/health`, for load balancers. */
const health = HttpLayerRouter.add("GET", "/_fw/health", HttpServerResponse.text("ok"))

/**
 * The listener's edge, around every route and the route lookup: the JSON 404 for unknown paths,
 * and CORS outside it (so a 404 to an allowed origin is readable too).
 */
const edge = (app: App) => {
  const cors = app.cors === undefined ? undefined : { middleware: Cors.middleware(app.cors), edge: Cors.edge(app.cors) }
  const middleware = <E, R>(httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    cors === undefined ? NotFound.middleware(httpEffect) : cors.middleware(NotFound.middleware(httpEffect))
  // Its eager form, for routes the server dispatches directly (`Dispatch`).
  const direct: DirectRoute.Edge = (request, answer) =>
    cors === undefined ? NotFound.edge(answer) : cors.edge(request, NotFound.edge(answer))
  return HttpLayerRouter.middleware(DirectRoute.withEdge(middleware, direct), { global: true })
}

/** The startup line, on the listener's address. */
const announce = (app: App) =>
  Effect.flatMap(HttpServerModule.HttpServer, (server) =>
    Console.log(`fw: serving ${app.name} on ${HttpServerModule.formatAddress(server.address)} (docs at /docs)`))

/** Every route of the app, before serving. */
export const routes = (app: App, production?: boolean) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const declared = DeclaredTables.namesOf(app.tables)
    for (const plugin of app.plugins) {
      yield* PluginHost.validate(plugin)
      yield* DeclaredTables.check(plugin, declared)
    }
    const maxBodyBytes = yield* BodyLimit.appMaxBodyBytes(app.maxBodyBytes)
    const serverGroup = RpcGroup.group(app.procedures.values(), "server", app.errors)
    const rpc = rpcRoutes(serverGroup, maxBodyBytes).pipe(
      Layer.provide(Rpc.handlersLayer(serverGroup)),
      Layer.provide(RpcSerialization.layerJson)
    )
    return Layer.mergeAll(
      rpc,
      Http.routes(app, maxBodyBytes, production),
      Inspect.routes(maxBodyBytes),
      Dashboard.routes,
      DataBrowser.routes,
      health,
      edge(app),
      ...app.plugins.map((plugin) => pluginRoutes(plugin, maxBodyBytes)),
      ...app.plugins.map((plugin) => Layer.scopedDiscard(PluginHost.start(plugin)))
    )
  }))

/**
 * The provided store as everything served sees it: an undeclared table fails `TableNotDeclared`
 * (see `DeclaredTables`).
 */
const declaredStore = (app: App) => {
  const declared = DeclaredTables.namesOf(app.tables)
  return Layer.effect(Store, Effect.map(Store, (store) => DeclaredTables.guard(store, declared)))
}

/**
 * Serves `app` on the provided `HttpServer`, over the provided `Store` and `ChangeTap`.
 * Provides a fetch-based `HttpClient` for auth strategies and plugins unless one is provided.
 * Requests get the platform's tracing span only when the app installs a tracer (`RequestTracing`).
 */
export const layer = (
  app: App,
  options: Options = {}
): Layer.Layer<
  never,
  Plugin.PluginInvalid | TableNotDeclared | SchemaApply.SchemaApplyFailed | Settings.SettingInvalid,
  Store | ChangeTap | HttpServer.HttpServer
> =>
  RequestTracing.onlyWhenTraced(Dispatch.serve(options.routes ? Layer.merge(routes(app, options.production), options.routes) : routes(app, options.production), {
    disableLogger: options.logRequests !== true,
    disableListenLog: true
  })).pipe(
    Layer.tap(() => options.announce === false ? Effect.void : announce(app)),
    Layer.provide(Runtime.layer(app).pipe(Layer.provideMerge(declaredStore(app)))),
    Layer.provide(options.applySchema === true ? SchemaApply.layer(app.tables) : Layer.empty),
    Layer.provide(FetchHttpClient.layer)
  )

