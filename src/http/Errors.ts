/**
 * The typed errors of the REST area: route declarations, idempotency records, rate-limit counters.
 * (The body-cap errors are shared with plugin routes and live in `app/BodyRead`.)
 */
import { Schema } from "effect"

/** The record store could not be reached. */
export class IdempotencyUnavailable extends Schema.TaggedError<IdempotencyUnavailable>()("IdempotencyUnavailable", {
  message: Schema.String
}) {}

/** The app's store is SQL but no `SqlClient` is in context to keep idempotency records in. */
export class IdempotencyStoreMissing extends Error {
  override readonly name = "IdempotencyStoreMissing"
}

/** The rate-limit counters could not be reached (the request is answered 503, never let through uncounted). */
export class RateLimitUnavailable extends Schema.TaggedError<RateLimitUnavailable>()("RateLimitUnavailable", {
  message: Schema.String
}) {}

/** The app's store is SQL but no `SqlClient` is in context to keep rate-limit counters in. */
export class RateLimitStoreMissing extends Error {
  override readonly name = "RateLimitStoreMissing"
}

/** A route declaration refused at definition or mount time. */
export class RestRouteInvalid extends Error {
  override readonly name = "RestRouteInvalid"
}

/** A REST handler set a response header or cookie that HTTP cannot carry, or one the framework owns. */
export class ResponseHeaderInvalid extends Schema.TaggedError<ResponseHeaderInvalid>()("ResponseHeaderInvalid", {
  header: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `response header "${this.header}": ${this.reason}`
  }
}
