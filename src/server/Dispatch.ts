/**
 * The dispatch table of fw's Node adapter (`NodeServer`): a mirror of the `HttpLayerRouter`'s
 * routes, so the server can find a request's route itself and call its eager twin
 * (`DirectRoute.withDirect`) instead of running the router.
 *
 * `layerRouter` is the router `Server.layer` serves with: the platform's own router, with every
 * route added to it also entered (same order, same `find-my-way-ts` configuration, so the same
 * route wins) into a table the served app carries (`tableOf`). A route is direct when its
 * handler has a twin, no route middleware wraps it and it is not prefixed. Direct dispatch is
 * off as a whole when the table cannot be exact: a prefixed sub-router (its routes bypass the
 * mirror) or a global middleware without an eager form (`DirectRoute.withEdge`).
 *
 * Anything may register a direct route: mount its handler with `DirectRoute.withDirect(handler,
 * twin)` through `router.add`/`router.addAll` as usual. Other servers (the platform's Node
 * server, test servers) ignore the table and run the router as always.
 */
import type { HttpApp, HttpServerRequest } from "@effect/platform"
import { HttpLayerRouter, HttpMiddleware, HttpServer } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import * as FindMyWay from "find-my-way-ts"
import * as DirectRoute from "../app/DirectRoute.js"

/** A mounted route, as the router holds it. */
type Route = HttpLayerRouter.Route<unknown, unknown>

/** A route the table found for a request. */
export interface Found {
  readonly route: Route
  /** The route's eager twin; `undefined`: the route runs through the router. */
  readonly direct: DirectRoute.Direct | undefined
  readonly params: Readonly<Record<string, string | undefined>>
  readonly searchParams: Readonly<Record<string, string | ReadonlyArray<string>>>
}

/** The routes of a served app, for direct dispatch. */
export interface Table {
  /** The route the router would pick for `method` and `url` (HEAD falls back to GET, as there). */
  readonly find: (method: string, url: string) => Found | undefined
  /** The global middleware's eager forms, around a direct answer. */
  readonly edge: DirectRoute.Edge
}

const tables = new WeakMap<object, Table>()

/** The table of a served app: `undefined` when it was not built by `layerRouter` or cannot be exact. */
export const tableOf = (app: object): Table | undefined => tables.get(app)

/** Whether route middleware (`HttpLayerRouter.middleware` without `global`) wraps routes added in `context`. */
const hasRouteMiddleware = (context: Context.Context<never>): boolean => {
  for (const key of context.unsafeMap.keys()) {
    if (key.startsWith("@effect/platform/HttpLayerRouter/Middleware-")) return true
  }
  return false
}

interface Entry {
  readonly route: Route
  readonly direct: DirectRoute.Direct | undefined
}

/** The platform's router, mirrored into a dispatch table (see the module comment). */
export const makeRouter: Effect.Effect<HttpLayerRouter.HttpRouter, never, never> = Effect.gen(function*() {
  const inner = yield* HttpLayerRouter.make
  const mirror = FindMyWay.make<Entry>(yield* HttpLayerRouter.RouterConfig)
  let exact = true
  const edges: Array<DirectRoute.Edge> = []
  const mirrored = (routes: ReadonlyArray<Route>) =>
    Effect.contextWith((context: Context.Context<never>) => {
      const wrapped = hasRouteMiddleware(context)
      for (const route of routes) {
        const direct = wrapped || route.prefix._tag === "Some" ? undefined : DirectRoute.directOf(route.handler)
        const entry: Entry = { route, direct }
        if (route.method === "*") mirror.all(route.path, entry)
        else mirror.on(route.method, route.path, entry)
      }
    })
  const addAll: HttpLayerRouter.HttpRouter["addAll"] = (routes) =>
    Effect.zipRight(inner.addAll(routes), mirrored(routes as unknown as ReadonlyArray<Route>))
  const find = (method: string, url: string): Found | undefined => {
    let result = mirror.find(method, url)
    if (result === undefined && method === "HEAD") result = mirror.find("GET", url)
    if (result === undefined) return undefined
    return { route: result.handler.route, direct: result.handler.direct, params: result.params, searchParams: result.searchParams }
  }
  const router: HttpLayerRouter.HttpRouter = {
    ...inner,
    prefixed: (prefix) => {
      // The sub-router adds to the platform's router directly: the mirror would miss its routes.
      exact = false
      return inner.prefixed(prefix)
    },
    addAll,
    add: (method, path, handler, options) => addAll([HttpLayerRouter.route(method, path, handler, options)]),
    addGlobalMiddleware: (middleware) =>
      Effect.zipRight(
        inner.addGlobalMiddleware(middleware),
        Effect.sync(() => {
          const edge = DirectRoute.edgeOf(middleware)
          if (edge === undefined) exact = false
          else edges.push(edge)
        })
      ),
    asHttpEffect: () => {
      const app = inner.asHttpEffect()
      if (exact) {
        // The first global middleware added is the outermost, as in the router.
        const layered = [...edges]
        const edge: DirectRoute.Edge = layered.length === 0
          ? (_request, answer) => answer
          : (request: HttpServerRequest.HttpServerRequest, answer) => {
            for (let i = layered.length - 1; i >= 0; i--) answer = layered[i]!(request, answer)
            return answer
          }
        tables.set(app, { find, edge })
      }
      return app
    }
  }
  return router
})

/** `HttpLayerRouter.layer`, mirrored into a dispatch table. */
export const layerRouter: Layer.Layer<HttpLayerRouter.HttpRouter> = Layer.effect(HttpLayerRouter.HttpRouter, makeRouter)

/**
 * `HttpLayerRouter.serve` over the mirrored router (`layerRouter`): the same layer, whose served
 * app carries its dispatch table.
 */
export const serve = ((
  appLayer: Layer.Layer<unknown, unknown, unknown>,
  options?: Parameters<typeof HttpLayerRouter.serve>[1]
) => {
  const logger = options?.disableLogger === true ? undefined : HttpMiddleware.logger
  const given = options?.middleware as HttpMiddleware.HttpMiddleware | undefined
  const middleware: HttpMiddleware.HttpMiddleware | undefined = given === undefined
    ? logger
    : logger === undefined
    ? given
    : (app) => logger(given(app))
  const routerLayer = options?.routerConfig === undefined
    ? layerRouter
    : Layer.provide(layerRouter, Layer.succeed(HttpLayerRouter.RouterConfig, options.routerConfig))
  const served = Effect.map(HttpLayerRouter.HttpRouter, (router) => {
    const app = router.asHttpEffect() as HttpApp.Default<never, never>
    return middleware === undefined ? HttpServer.serve(app) : HttpServer.serve(app, middleware)
  }).pipe(
    Layer.unwrapScoped,
    Layer.provideMerge(appLayer),
    Layer.provide(routerLayer)
  )
  return options?.disableListenLog === true ? served : HttpServer.withLogAddress(served)
}) as unknown as typeof HttpLayerRouter.serve
