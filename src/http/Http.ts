/**
 * The app's REST surface on the rpc listener: hand-written routes and projected procedures
 * through the pipeline, 405 answers on their paths (and on `/rpc`), 415 for multipart under
 * `/form/*`, the OpenAPI documents (`/openapi.json` for the REST surface, `/rpc/openapi.json` for
 * the procedures where `openApi.procedures` publishes it) and a docs page at `/docs`.
 */
import { HttpLayerRouter, HttpServerRequest, HttpServerResponse, OpenApi } from "@effect/platform"
import { Config, Effect, Layer, Option } from "effect"
import type { App } from "../app/App.js"
import * as HttpResponses from "../app/HttpResponses.js"
import { Runtime } from "../app/Runtime.js"
import { Store } from "../kernel/store/Store.js"
import * as Endpoint from "./Endpoint.js"
import * as Idempotency from "./Idempotency.js"
import * as IdempotencyStore from "./IdempotencyStore.js"
import * as MethodGate from "./MethodGate.js"
import * as DocsPage from "./DocsPage.js"
import * as OpenApiDocument from "./OpenApiDocument.js"
import * as Pipeline from "./Pipeline.js"
import * as ProcedureDocument from "./ProcedureDocument.js"
import * as Projection from "./Projection.js"
import * as RateLimitStore from "./RateLimitStore.js"
import * as RequestBody from "./RequestBody.js"
import * as RestRoute from "./RestRoute.js"

/** The endpoints of an app: its REST routes, then its projected procedures. */
export const endpointsOf = (app: App): ReadonlyArray<Endpoint.Endpoint> =>
  Endpoint.withUniqueOperationIds([
    ...app.restRoutes.map((declaration) => Endpoint.fromRoute(RestRoute.fromDeclaration(declaration))),
    ...Projection.endpoints(app.procedures.values())
  ])

/** The HttpApi of an app's REST surface (its document is what `/openapi.json` serves). */
export const api = (app: App) =>
  OpenApiDocument.api(app, endpointsOf(app), Idempotency.settingsOf(app.idempotency) !== undefined)

/**
 * Whether the procedures' document is served: `openApi.procedures` `"always"`, or `"development"`
 * (the default) unless serving in production: `production` when the server says (`fw serve`,
 * `Server.Options.production`), else `NODE_ENV=production`. The procedures are the app's private API:
 * production publishes their shape only when the app says so.
 */
export const publishesProcedures = (app: App, production?: boolean): Effect.Effect<boolean> =>
  app.openApi.procedures !== "development"
    ? Effect.succeed(app.openApi.procedures === "always")
    : production !== undefined
    ? Effect.succeed(!production)
    : Config.string("NODE_ENV").pipe(
      Config.withDefault(""),
      Effect.map((env) => env.trim() !== "production"),
      // An unreadable environment is not production's say-so: stay closed.
      Effect.orElseSucceed(() => false)
    )

/** The paths the surface mounts, each with its methods and shared body cap. */
interface PathGroup {
  readonly path: `/${string}`
  readonly methods: Set<string>
  /** The widest `maxBodyBytes` a body-reading route of the group declares (spec 8), else the app's cap. */
  cap: number
  hasOverride: boolean
}

/**
 * Checks the endpoints as mounted together: one route per method and path, and no
 * `streaming: true` on a route the idempotency binding claims. Throws `RestRouteInvalid`.
 */
export const plan = (
  endpoints: ReadonlyArray<Endpoint.Endpoint>,
  maxBodyBytes: number,
  idempotency: Idempotency.Settings | undefined
): ReadonlyMap<string, PathGroup> => {
  const groups = new Map<string, PathGroup>()
  for (const endpoint of endpoints) {
    const what = `${endpoint.method} ${endpoint.path}`
    if (idempotency !== undefined && endpoint.claimable && endpoint.streaming) {
      throw new RestRoute.RestRouteInvalid(`${what}: "streaming: true" on a route the idempotency binding claims (its answers cannot be replayed)`)
    }
    const key = Endpoint.pathKey(endpoint.path)
    let group = groups.get(key)
    if (group === undefined) groups.set(key, group = { path: endpoint.path, methods: new Set(), cap: maxBodyBytes, hasOverride: false })
    const clashes = group.methods.has(endpoint.method) ||
      (endpoint.method === "HEAD" && group.methods.has("GET")) || (endpoint.method === "GET" && group.methods.has("HEAD"))
    if (clashes) throw new RestRoute.RestRouteInvalid(`${what}: declared twice (a route or a projected procedure already answers it)`)
    group.methods.add(endpoint.method)
    // Routes sharing a path share one body read: the widest override among the group's
    // body-reading routes (a sibling without one does not widen it back to the app's cap).
    if (RestRoute.mutatingMethods.has(endpoint.method) && endpoint.maxBodyBytes !== undefined) {
      group.cap = group.hasOverride ? Math.max(group.cap, endpoint.maxBodyBytes) : endpoint.maxBodyBytes
      group.hasOverride = true
    }
  }
  return groups
}

/** `/rpc`: GET is the WebSocket upgrade, POST the HTTP transport; anything else is 405. */
const rpcMethodGate = MethodGate.routes("/rpc", new Set(["GET", "POST"]))

/** Multipart against `/form/*` is 415 (there is no multipart parser); other requests there find nothing. */
const formRoutes = (["POST", "PUT", "PATCH", "DELETE"] as const).map((method) =>
  HttpLayerRouter.route(
    method,
    "/form/*",
    Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
      RequestBody.isMultipart(request.headers)
        ? RequestBody.multipartRefused()
        : HttpResponses.error(404, "RouteNotFound", "no route here"))
  )
)

/**
 * The REST routes, the projections, the method gates, the OpenAPI document and the docs page of
 * `app`, reading bodies up to `maxBodyBytes` (or a route's own cap); `production` as in
 * `publishesProcedures`. With `idempotency` on, the
 * `IdempotencyStore` in context is used, or else the one matching the store (`layerFromStore`);
 * likewise the `RateLimitStore` when an endpoint declares a `rateLimit`.
 */
export const routes = (app: App, maxBodyBytes: number, production?: boolean) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const settings = Idempotency.settingsOf(app.idempotency)
    const endpoints = endpointsOf(app)
    const groups = plan(endpoints, maxBodyBytes, settings)
    const api = OpenApiDocument.api(app, endpoints, settings !== undefined)
    const document = OpenApi.fromApi(api)
    const procedureDocument = (yield* publishesProcedures(app, production))
      ? yield* Effect.try(() => OpenApi.fromApi(ProcedureDocument.api(app))).pipe(
        // A document is help, not service: what it cannot describe must not stop the app.
        Effect.tapError((error) => Effect.logWarning(`the procedures' OpenAPI document could not be made; ${ProcedureDocument.path} is not served`, error)),
        Effect.orElseSucceed(() => undefined)
      )
      : undefined
    const provided = yield* Effect.serviceOption(IdempotencyStore.IdempotencyStore)
    // Off, the binding never reads it: an empty memory tier stands in.
    const idempotencyStore: Layer.Layer<IdempotencyStore.IdempotencyStore, never, Store> = Option.isSome(provided)
      ? Layer.succeed(IdempotencyStore.IdempotencyStore, provided.value)
      : settings === undefined
      ? IdempotencyStore.layerMemory
      : Layer.orDie(IdempotencyStore.layerFromStore)
    const limited = endpoints.some((endpoint) => endpoint.rateLimit !== undefined)
    const providedCounters = yield* Effect.serviceOption(RateLimitStore.RateLimitStore)
    const rateLimitStore: Layer.Layer<RateLimitStore.RateLimitStore, never, Store> | undefined = Option.isSome(providedCounters)
      ? Layer.succeed(RateLimitStore.RateLimitStore, providedCounters.value)
      : limited
      ? Layer.orDie(RateLimitStore.layerFromStore)
      : undefined
    // The clock of the mounting fiber drives every window (a TestClock in tests); read once here,
    // it costs no effect step per request.
    const clock = yield* Effect.clock
    const mounted = HttpLayerRouter.use((router) =>
      Effect.gen(function*() {
        const env: Pipeline.Env = {
          runtime: yield* Runtime,
          store: yield* Store,
          idempotency: settings === undefined
            ? undefined
            : { settings, store: yield* IdempotencyStore.IdempotencyStore },
          rateLimits: limited ? { store: yield* RateLimitStore.RateLimitStore, clock } : undefined
        }
        const byKey = new Map(endpoints.map((endpoint) => [endpoint, Endpoint.pathKey(endpoint.path)]))
        for (const endpoint of endpoints) {
          const cap = groups.get(byKey.get(endpoint)!)!.cap
          // The router types exclude HEAD (it serves HEAD from GET); a HEAD-only route is mounted as declared.
          const method = endpoint.method as Exclude<RestRoute.Method, "HEAD">
          yield* router.add(method, endpoint.path, Pipeline.handler(endpoint, env, cap))
        }
        const mounted: ReadonlyArray<MethodGate.Mounted> = [
          ...endpoints,
          ...app.plugins.flatMap((plugin) => plugin.routes ?? [])
        ]
        for (const group of groups.values()) {
          yield* router.addAll(MethodGate.routes(group.path, MethodGate.methodsOn(group.path, group.methods, mounted)))
        }
        if (!groups.has("/rpc")) yield* router.addAll(rpcMethodGate)
        if (!groups.has("/form/*")) yield* router.addAll(formRoutes)
        yield* router.add("GET", "/openapi.json", Effect.succeed(HttpServerResponse.unsafeJson(document)))
        if (procedureDocument !== undefined) {
          yield* router.add("GET", ProcedureDocument.path, Effect.succeed(HttpServerResponse.unsafeJson(procedureDocument)))
        }
      })
    ).pipe(
      Layer.provide(idempotencyStore),
      // Without a limited endpoint the counters are never read: an empty memory tier stands in.
      Layer.provide(rateLimitStore ?? RateLimitStore.layerMemory)
    )
    return Layer.merge(mounted, DocsPage.layer(app.name, document, procedureDocument))
  }))
