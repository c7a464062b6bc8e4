/**
 * `defineRestRoute`: a plain HTTP route on the rpc listener, with a Schema-typed input
 * `{query?, params?, body?}`, guards, versioning, deprecation and sunset, a body cap, ETags and
 * streamed answers (`sse(...)`, `bytes(...)`).
 *
 * ```ts
 * export const getItem = defineRestRoute({
 *   method: "GET",
 *   path: "/items/:id",
 *   version: "v2",                                        // served at /v2/items/:id
 *   input: Schema.Struct({ params: Schema.Struct({ id: Schema.String }) }),
 *   output: Item,
 *   guards: [requireScope("items:read")],
 *   etag: true,
 *   handler: ({ params }, { store }) => store.get(Items, params.id).pipe(
 *     Effect.flatMap(Option.match({ onNone: () => Effect.fail({ status: 404, message: "no such item" }), onSome: Effect.succeed })))
 * })
 * ```
 */
import type { Effect } from "effect"
import { Schema } from "effect"
import type * as App from "../app/App.js"
import type * as Guard from "../app/Guard.js"
import * as RateLimit from "../app/RateLimit.js"
import type * as Bytes from "./Bytes.js"
import type * as ResponseControl from "./ResponseControl.js"
import type * as Sse from "./Sse.js"
import { RestRouteInvalid } from "./Errors.js"

/** The methods a route may declare. `HEAD` is also served wherever `GET` is, without a second route. */
export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS"

/** Methods that carry a request body and that idempotency may claim. */
export const mutatingMethods: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"])

/**
 * What a guard and a handler see: the resolved subject, the request headers, the store, the trace
 * id, and the response's own headers and cookies (see `ResponseControl`).
 */
export interface Context extends Guard.Context {
  readonly traceId: string
  readonly response: ResponseControl.ResponseControl
}

/** What a handler may answer: the output (encoded as JSON), or a streamed answer. */
export type Answer<O> = O | Sse.Sse | Bytes.Bytes

/** The encoded shape every route input decodes from. */
export interface RawInput {
  readonly query?: unknown
  readonly params?: unknown
  readonly body?: unknown
}

const TypeId: unique symbol = Symbol.for("@fw/framework/http/RestRoute")

/** A declared REST route. `path` is the mounted path, with its version prefix. */
export interface RestRoute<I, IE extends RawInput, O, OE> extends App.RestRouteDeclaration {
  readonly [TypeId]: typeof TypeId
  readonly method: Method
  readonly path: `/${string}`
  /** The path as declared (without the version prefix). */
  readonly declaredPath: `/${string}`
  /** The declared version, or the `/vN/` prefix of the declared path. */
  readonly version: string | undefined
  readonly input: Schema.Schema<I, IE>
  readonly output: Schema.Schema<O, OE>
  readonly summary: string | undefined
  readonly guards: ReadonlyArray<Guard.Guard>
  readonly handler: (input: I, ctx: Context) => Effect.Effect<Answer<O>, unknown>
  /** The replacement pointer: a path (`/v2/items`) or a method and path (`GET /v2/items`). */
  readonly deprecated: string | undefined
  readonly sunset: Date | undefined
  readonly maxBodyBytes: number | undefined
  /** Weak ETags and `304`; GET routes only. */
  readonly etag: boolean
  readonly streaming: boolean
  readonly rateLimit: RateLimit.Declared | undefined
}

/**
 * Any route. `any` is the one builder boundary: routes of different input and output types share
 * one list, and the pipeline decodes and encodes through each route's own schemas.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Any = RestRoute<any, any, any, any>

/** Options of `defineRestRoute`. `input` defaults to an empty struct, `output` to any JSON value. */
export interface Options<I, IE extends RawInput, O, OE> {
  readonly method: Method
  /** A literal path; `:name` segments are path params. */
  readonly path: `/${string}`
  readonly input?: Schema.Schema<I, IE>
  readonly output?: Schema.Schema<O, OE>
  readonly summary?: string
  readonly guards?: ReadonlyArray<Guard.Guard>
  readonly handler: (input: I, ctx: Context) => Effect.Effect<Answer<O>, unknown>
  /** Mounts the route under `/<version>`, e.g. `v2`. */
  readonly version?: string
  /** Marks the route deprecated; the value points at the replacement (`GET /v2/items`). */
  readonly deprecated?: string
  /** An ISO date; from then on the route answers 410. */
  readonly sunset?: string
  readonly maxBodyBytes?: number
  readonly etag?: boolean
  readonly streaming?: boolean
  /** At most `limit` requests per `windowMs` and key (see `RateLimit`); answered 429 past it. */
  readonly rateLimit?: RateLimit.RateLimit
}

const methods: ReadonlySet<string> = new Set(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
const versionPattern = /^v\d+$/
const versionPrefix = /^\/(v\d+)(?:\/|$)/
const segmentPattern = /^(?::[A-Za-z_][A-Za-z0-9_]*|[A-Za-z0-9._~!$&'()+,;=@%-]*|\*)$/
const isoDate = /^\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?$/

/** The `/vN/` version a path starts with, if any. */
export const versionOfPath = (path: string): string | undefined => versionPrefix.exec(path)?.[1]

/** Checks a path's syntax (literal segments, `:name` params, a trailing `*`). */
export const checkPath = (path: string, what: string): void => {
  if (!path.startsWith("/")) throw new RestRouteInvalid(`${what}: the path "${path}" must start with "/"`)
  const segments = path.slice(1).split("/")
  segments.forEach((segment, index) => {
    if (!segmentPattern.test(segment) || (segment === "*" && index !== segments.length - 1)) {
      throw new RestRouteInvalid(`${what}: the path segment "${segment}" is neither literal text, a ":name" param nor a final "*"`)
    }
  })
}

/** Applies a version to a path; refuses a version on a path that already starts with `/vN/`. */
export const versionedPath = (path: `/${string}`, version: string | undefined, what: string): `/${string}` => {
  if (version === undefined) return path
  if (!versionPattern.test(version)) throw new RestRouteInvalid(`${what}: version "${version}" must look like "v2"`)
  if (versionOfPath(path) !== undefined) {
    throw new RestRouteInvalid(`${what}: the path "${path}" already starts with a version; drop "version: ${version}" or the prefix`)
  }
  return path === "/" ? `/${version}` : `/${version}${path}`
}

/**
 * Declares a REST route. Throws `RestRouteInvalid` for an unknown method, a malformed path, a
 * `version` on a path already under `/vN/`, a sunset that is not an ISO date, or a cap that is not
 * a positive integer; throws `RateLimitInvalid` for a malformed `rateLimit`.
 */
export const defineRestRoute = <I = {}, IE extends RawInput = {}, O = unknown, OE = unknown>(
  options: Options<I, IE, O, OE>
): RestRoute<I, IE, O, OE> => {
  const what = `route ${options.method} ${options.path}`
  if (!methods.has(options.method)) throw new RestRouteInvalid(`${what}: unknown method`)
  checkPath(options.path, what)
  const path = versionedPath(options.path, options.version, what)
  let sunset: Date | undefined
  if (options.sunset !== undefined) {
    sunset = new Date(options.sunset)
    if (!isoDate.test(options.sunset) || Number.isNaN(sunset.getTime())) {
      throw new RestRouteInvalid(`${what}: sunset "${options.sunset}" is not an ISO date (e.g. 2027-01-31)`)
    }
  }
  if (options.maxBodyBytes !== undefined && !(Number.isInteger(options.maxBodyBytes) && options.maxBodyBytes > 0)) {
    throw new RestRouteInvalid(`${what}: maxBodyBytes must be a positive integer`)
  }
  const rateLimit = RateLimit.check(options.rateLimit, what)
  return {
    [TypeId]: TypeId,
    _tag: "RestRoute",
    method: options.method,
    path,
    declaredPath: options.path,
    version: options.version ?? versionOfPath(options.path),
    // Without declared schemas the input is an empty struct and the output any JSON value; the
    // casts only widen those defaults to the (defaulted) type parameters.
    input: options.input ?? (Schema.Struct({}) as unknown as Schema.Schema<I, IE>),
    output: options.output ?? (Schema.Unknown as unknown as Schema.Schema<O, OE>),
    summary: options.summary,
    guards: options.guards ?? [],
    handler: options.handler,
    deprecated: options.deprecated,
    sunset,
    maxBodyBytes: options.maxBodyBytes,
    etag: options.etag === true && options.method === "GET",
    streaming: options.streaming === true,
    rateLimit
  }
}

/**
 * The route behind an app's REST route declaration. Only `defineRestRoute` makes routes; anything
 * else in `restRoutes` is refused when the app is mounted.
 */
export const fromDeclaration = (declaration: App.RestRouteDeclaration): Any => {
  if (TypeId in declaration) return declaration as Any
  throw new RestRouteInvalid(`route ${declaration.method} ${declaration.path}: not made by defineRestRoute`)
}

export { RestRouteInvalid } from "./Errors.js"
