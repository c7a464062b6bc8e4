/**
 * `defineRestRoute`: a plain HTTP route on the rpc listener, with a Schema-typed input
 * `{query?, params?, body?}`, guards, versioning, deprecation and sunset, a body cap and ETags.
 */
import type { Effect, Schema } from "effect"
import type * as Guard from "../app/Guard.js"
import type { HandlerContext } from "../app/Procedure.js"
import type * as Bytes from "./Bytes.js"
import type * as Sse from "./Sse.js"

/** The methods a route may declare (`HEAD` is served wherever `GET` is). */
export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS"

/** What a REST handler sees besides its input. */
export type Context = HandlerContext

/** A declared REST route. `path` is the mounted path (with its version prefix). */
export interface RestRoute<I, IE, O, OE> {
  readonly _tag: "RestRoute"
  readonly method: Method
  readonly path: `/${string}`
  readonly version: string | undefined
  readonly input: Schema.Schema<I, IE>
  readonly output: Schema.Schema<O, OE>
  readonly summary: string | undefined
  readonly guards: ReadonlyArray<Guard.Guard>
  /** Returns the output, or an `sse(...)` or `bytes(...)` answer. */
  readonly handler: (input: I, ctx: Context) => Effect.Effect<O | Sse.SseResponse | Bytes.BytesResponse, unknown>
  /** The replacement pointer (a path, or a description such as `GET /v2/items`). */
  readonly deprecated: string | undefined
  readonly sunset: Date | undefined
  readonly maxBodyBytes: number | undefined
  readonly etag: boolean
  readonly streaming: boolean
  /** What the OpenAPI document shows as query and body, when `input` decodes them loosely (projections). */
  readonly documented?: { readonly query?: Schema.Schema.Any; readonly body?: Schema.Schema.Any }
}

/**
 * Any route. `any` is the builder boundary: routes of different input and output types share one
 * list, and the pipeline decodes and encodes through each route's own schemas.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Any = RestRoute<any, any, any, any>

/** A route declaration refused at definition time. */
export class RestRouteInvalid extends Error {
  override readonly name = "RestRouteInvalid"
}

const versionPattern = /^v\d+$/
const versionedPath = /^\/v\d+(\/|$)/

/** Declares a REST route. Throws `RestRouteInvalid` for `version` on a path already under `/vN/`. */
export const defineRestRoute = <I, IE, O, OE>(descriptor: {
  readonly method: Method
  readonly path: `/${string}`
  readonly input: Schema.Schema<I, IE>
  readonly output: Schema.Schema<O, OE>
  readonly handler: (input: I, ctx: Context) => Effect.Effect<O | Sse.SseResponse | Bytes.BytesResponse, unknown>
  readonly summary?: string
  readonly guards?: ReadonlyArray<Guard.Guard>
  readonly version?: string
  readonly deprecated?: string
  readonly sunset?: string | Date
  readonly maxBodyBytes?: number
  readonly etag?: boolean
  readonly streaming?: boolean
}): RestRoute<I, IE, O, OE> => {
  const { version } = descriptor
  if (version !== undefined) {
    if (!versionPattern.test(version)) throw new RestRouteInvalid(`route ${descriptor.path}: version "${version}" must look like "v2"`)
    if (versionedPath.test(descriptor.path)) {
      throw new RestRouteInvalid(`route ${descriptor.path}: the path already starts with a version and also declares version "${version}"`)
    }
  }
  const sunset = descriptor.sunset === undefined ? undefined : new Date(descriptor.sunset)
  if (sunset !== undefined && Number.isNaN(sunset.getTime())) {
    throw new RestRouteInvalid(`route ${descriptor.path}: sunset "${String(descriptor.sunset)}" is not a date`)
  }
  return {
    _tag: "RestRoute",
    method: descriptor.method,
    path: version === undefined ? descriptor.path : `/${version}${descriptor.path}`,
    version,
    input: descriptor.input,
    output: descriptor.output,
    summary: descriptor.summary,
    guards: descriptor.guards ?? [],
    handler: descriptor.handler,
    deprecated: descriptor.deprecated,
    sunset,
    maxBodyBytes: descriptor.maxBodyBytes,
    etag: descriptor.etag === true && descriptor.method === "GET",
    streaming: descriptor.streaming === true
  }
}
