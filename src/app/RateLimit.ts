/**
 * The `rateLimit` declaration of a projected procedure (`publicApi.rateLimit`, spec 2.9) and of a
 * REST route (`defineRestRoute({rateLimit})`): at most `limit` requests per `windowMs` for each
 * key, the key chosen by `by`:
 *
 * - `"subject"` (default): the caller (`type:id`); an anonymous caller is keyed by its IP address;
 * - `"tenant"`: the caller's tenant; a caller without a tenant is keyed as by `"subject"`;
 * - `"ip"`: the peer address of the connection (not `X-Forwarded-For`: a header any client can
 *   set; behind a proxy, key by a function that reads the header the proxy sets);
 * - a function of the request (`{subject, headers, ip}`) returning the key, or `undefined` to
 *   leave that request uncounted.
 *
 * Counting is a fixed window per key that starts at the key's first request. The declaration is
 * checked when the procedure or route is defined: a malformed one throws `RateLimitInvalid`.
 */
import type { Headers } from "@effect/platform"
import { Schema } from "effect"
import type { Subject } from "../kernel/Subject.js"

/** What a `by` function sees of a request. */
export interface Request {
  readonly subject: Subject
  readonly headers: Headers.Headers
  /** The connection's peer address, when the transport knows it. */
  readonly ip: string | undefined
}

/** How requests are grouped into counters. */
export type By = "subject" | "tenant" | "ip" | ((request: Request) => string | undefined)

/** A rate limit as written in a declaration. */
export interface RateLimit {
  /** Requests admitted per window and key: a positive integer. */
  readonly limit: number
  /** The window in milliseconds: a positive integer, at least 1000 (the headers count in seconds). */
  readonly windowMs: number
  /** The key of a request; default `"subject"`. */
  readonly by?: By
}

/** A checked declaration, with its default filled in. */
export interface Declared {
  readonly limit: number
  readonly windowMs: number
  readonly by: By
}

/** A `rateLimit` declaration the framework refuses; thrown at definition. */
export class RateLimitInvalid extends Schema.TaggedError<RateLimitInvalid>()("RateLimitInvalid", {
  /** What declared it, e.g. `procedure "todos.add" (publicApi)` or `route POST /orders`. */
  what: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.what}: rateLimit ${this.reason}`
  }
}

const keys: ReadonlySet<string> = new Set(["limit", "windowMs", "by"])
const isPositiveInteger = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value > 0

/**
 * Checks a declaration (`undefined` stays `undefined`). Throws `RateLimitInvalid` for anything but
 * an object `{limit, windowMs, by?}` with a positive integer `limit`, a whole number of
 * milliseconds `windowMs` of at least one second, and a known `by`.
 */
export const check = (value: unknown, what: string): Declared | undefined => {
  if (value === undefined) return undefined
  const refuse = (reason: string) => new RateLimitInvalid({ what, reason })
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw refuse("must be an object {limit, windowMs, by?}")
  }
  for (const key of Object.keys(value)) {
    if (!keys.has(key)) throw refuse(`has an unknown key "${key}" (expected limit, windowMs, by)`)
  }
  const { by, limit, windowMs } = value as Partial<Record<"limit" | "windowMs" | "by", unknown>>
  if (!isPositiveInteger(limit)) throw refuse(`limit must be a positive integer, got ${String(limit)}`)
  if (!isPositiveInteger(windowMs) || windowMs < 1000) {
    throw refuse(`windowMs must be a whole number of milliseconds of at least 1000, got ${String(windowMs)}`)
  }
  if (by !== undefined && by !== "subject" && by !== "tenant" && by !== "ip" && typeof by !== "function") {
    throw refuse(`by must be "subject", "tenant", "ip" or a function of the request, got ${JSON.stringify(by)}`)
  }
  return { limit, windowMs, by: (by as By | undefined) ?? "subject" }
}
