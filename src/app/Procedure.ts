/**
 * Procedures: `query` (read-only, live over the socket), `mutation` (writes) and `action`
 * (side effects beyond the store). Each has Schema input/output, guards and optional REST projection.
 */
import type { Headers } from "@effect/platform"
import type { Effect } from "effect"
import { Schema } from "effect"
import type { StoreShape } from "../kernel/store/Store.js"
import type { Subject } from "../kernel/Subject.js"
import type { Guard } from "./Guard.js"
import * as RateLimit from "./RateLimit.js"

/** The three procedure kinds. */
export type Kind = "query" | "mutation" | "action"

/** What a handler sees besides its input. */
export interface HandlerContext {
  readonly subject: Subject
  readonly store: StoreShape
  readonly headers: Headers.Headers
  readonly traceId: string
}

/** REST projection of a procedure (spec 2.9, 4.5 rule 4). */
export interface PublicApi {
  readonly method?: "GET" | StateChangingMethod
  readonly path?: `/${string}`
  readonly version?: string
  readonly scopes?: ReadonlyArray<string>
  /** At most `limit` requests per `windowMs` and key on the projected route (see `RateLimit`). */
  readonly rateLimit?: RateLimit.RateLimit
  readonly idempotent?: boolean
  /** Queries only: project a `text/event-stream` live query. */
  readonly stream?: "sse"
}

/** The methods a mutation or action may be projected with. */
export type StateChangingMethod = "POST" | "PUT" | "PATCH" | "DELETE"

/**
 * The projection of a mutation or action: never `GET` (nor `HEAD`). A browser sends a `GET` with
 * the user's `SameSite=Lax` cookies when another site links or redirects to it, so a write behind
 * a `GET` would run for whoever follows the link.
 */
export interface StateChangingPublicApi extends PublicApi {
  readonly method?: StateChangingMethod
}

/** A `publicApi` declaration the framework refuses; thrown at definition. */
export class PublicApiInvalid extends Schema.TaggedError<PublicApiInvalid>()("PublicApiInvalid", {
  /** The procedure, e.g. `mutation "notes.quickAdd"`. */
  what: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.what} (publicApi): ${this.reason}`
  }
}

const stateChangingMethods: ReadonlySet<string> = new Set<StateChangingMethod>(["POST", "PUT", "PATCH", "DELETE"])

/**
 * Checks that a mutation or action is not projected with a safe method (`GET`, `HEAD`): those are
 * what a link, an image or a redirect from another site makes the browser send with the user's
 * cookies. Throws `PublicApiInvalid`; a query passes.
 */
export const checkMethod = (kind: Kind, tag: string, publicApi: PublicApi | undefined): void => {
  const method: unknown = publicApi?.method
  if (kind === "query" || method === undefined || (typeof method === "string" && stateChangingMethods.has(method))) return
  throw new PublicApiInvalid({
    what: `${kind} "${tag}"`,
    reason: `a ${kind} cannot be projected as ${JSON.stringify(method)}: a link or redirect from another site makes ` +
      `the browser send GET with the user's cookies, so the write would run for whoever follows it; ` +
      `use POST, PUT, PATCH or DELETE (or make it a query if it only reads)`
  })
}

/**
 * A declared procedure. A handler may fail with a typed store error, `{status, message}`
 * (any object with a numeric status and a string message), or anything else (reported as 500).
 */
export interface Procedure<K extends Kind, Tag extends string, I, IE, O, OE> {
  readonly _tag: "Procedure"
  readonly kind: K
  readonly tag: Tag
  readonly input: Schema.Schema<I, IE>
  readonly output: Schema.Schema<O, OE>
  readonly handler: (input: I, ctx: HandlerContext) => Effect.Effect<O, unknown>
  readonly guards: ReadonlyArray<Guard>
  readonly publicApi: PublicApi | undefined
  /** One line for the OpenAPI documents (default: the kind and tag, `mutation notes.add`). */
  readonly summary?: string | undefined
  /** A longer description for the OpenAPI documents. */
  readonly description?: string | undefined
}

/**
 * Any procedure. `any` is the one documented builder boundary: procedures of different input and
 * output types are stored in one list, and the runtime decodes and encodes through their schemas.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Any = Procedure<Kind, string, any, any, any, any>

/** A call of a procedure, as seen by interceptors. */
export interface Call {
  readonly kind: Kind
  readonly tag: string
  readonly input: unknown
  readonly subject: Subject
  readonly headers: Headers.Headers
  readonly traceId: string
}

/** Options of a procedure constructor; a mutation's or action's `publicApi` is a `StateChangingPublicApi`. */
export interface Options<I, IE, O, OE, P extends PublicApi = PublicApi> {
  readonly input: Schema.Schema<I, IE>
  readonly output: Schema.Schema<O, OE>
  readonly handler: (input: I, ctx: HandlerContext) => Effect.Effect<O, unknown>
  readonly guards?: ReadonlyArray<Guard>
  readonly publicApi?: P
  /** One line for the OpenAPI documents (default: the kind and tag, `mutation notes.add`). */
  readonly summary?: string
  /** A longer description for the OpenAPI documents. */
  readonly description?: string
}

const tagPattern = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*$/

const make = <K extends Kind>(kind: K) =>
<const Tag extends string, I, IE, O, OE>(
  tag: Tag,
  options: Options<I, IE, O, OE, K extends "query" ? PublicApi : StateChangingPublicApi>
): Procedure<K, Tag, I, IE, O, OE> => {
  if (!tagPattern.test(tag)) throw new Error(`procedure tag "${tag}" must be dotted identifiers, e.g. "todos.list"`)
  checkMethod(kind, tag, options.publicApi)
  // A malformed limit must stop the definition, not silently leave the route unlimited.
  const rateLimit = RateLimit.check(options.publicApi?.rateLimit, `procedure "${tag}" (publicApi)`)
  return {
    _tag: "Procedure",
    kind,
    tag,
    input: options.input,
    output: options.output,
    handler: options.handler,
    guards: options.guards ?? [],
    publicApi: options.publicApi === undefined || rateLimit === undefined ? options.publicApi : { ...options.publicApi, rateLimit },
    summary: options.summary,
    description: options.description
  }
}

/** Declares a query: reads only; subscribed over the socket it is live. */
export const query = make("query")
/** Declares a mutation: writes to the store. Its `publicApi` method is never `GET` (throws `PublicApiInvalid`). */
export const mutation = make("mutation")
/** Declares an action: side effects beyond the store (calls out, sends mail). Never projected as `GET` either. */
export const action = make("action")
