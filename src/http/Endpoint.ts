/**
 * What the pipeline mounts: one endpoint per hand-written route and per projected procedure, with
 * what the method gate, the sunset gate, the body cap, idempotency and the OpenAPI document need.
 */
import type * as Procedure from "../app/Procedure.js"
import type * as RateLimit from "../app/RateLimit.js"
import type * as Lifecycle from "./Lifecycle.js"
import * as RestRoute from "./RestRoute.js"

/** How an endpoint answers. */
export type Serve =
  /** A hand-written route: decode, guards and handler in the pipeline. */
  | { readonly _tag: "Route"; readonly route: RestRoute.Any }
  /** A projected query, mutation or action: through the procedure runtime, as on the socket. */
  | { readonly _tag: "Procedure"; readonly procedure: Procedure.Any; readonly scopes: ReadonlyArray<string> }
  /** A projected live query: a `text/event-stream` of snapshot and deltas. */
  | { readonly _tag: "Live"; readonly procedure: Procedure.Any; readonly scopes: ReadonlyArray<string> }

/** A mounted endpoint. */
export interface Endpoint {
  readonly method: RestRoute.Method
  readonly path: `/${string}`
  /** The API version, for the OpenAPI document (`undefined`: unversioned). */
  readonly version: string | undefined
  readonly lifecycle: Lifecycle.Declared
  readonly maxBodyBytes: number | undefined
  readonly streaming: boolean
  /** Whether the idempotency binding may claim it (mutating methods, unless a projection opts out). */
  readonly claimable: boolean
  readonly summary: string | undefined
  /** The endpoint's rate limit (`undefined`: unlimited). */
  readonly rateLimit: RateLimit.Declared | undefined
  /** A unique, stable operation name. */
  readonly operationId: string
  readonly serve: Serve
}

/** `GET /v2/items/:id` → `get_v2_items_by_id`; `GET /files/*` → `get_files_rest`. */
export const operationIdOf = (method: string, path: string): string =>
  `${method.toLowerCase()}${
    path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, "by_$1").replace(/\*/g, "rest").replace(/[^A-Za-z0-9]+/g, "_").replace(/_+$/, "")
  }`

/**
 * The endpoints with operation ids made unique (`/a-b` and `/a_b` read alike): the HttpApi keeps one
 * endpoint per id, so a collision would silently drop an operation from the document.
 */
export const withUniqueOperationIds = (endpoints: ReadonlyArray<Endpoint>): ReadonlyArray<Endpoint> => {
  const used = new Set<string>()
  return endpoints.map((endpoint) => {
    let operationId = endpoint.operationId
    for (let n = 2; used.has(operationId); n++) operationId = `${endpoint.operationId}_${n}`
    used.add(operationId)
    return operationId === endpoint.operationId ? endpoint : { ...endpoint, operationId }
  })
}

/** The endpoint of a hand-written route. */
export const fromRoute = (route: RestRoute.Any): Endpoint => ({
  method: route.method,
  path: route.path,
  version: route.version,
  lifecycle: { version: route.version, deprecated: route.deprecated, sunset: route.sunset },
  maxBodyBytes: route.maxBodyBytes,
  streaming: route.streaming,
  claimable: RestRoute.mutatingMethods.has(route.method),
  summary: route.summary,
  rateLimit: route.rateLimit,
  operationId: operationIdOf(route.method, route.path),
  serve: { _tag: "Route", route }
})

/** The path as the router sees it: param names do not distinguish two paths. */
export const pathKey = (path: string): string => path.replace(/:[A-Za-z_][A-Za-z0-9_]*/g, ":")
