/**
 * The typed errors of the REST area: route declarations and idempotency records. (The
 * body-cap errors are shared with plugin routes and live in `app/BodyRead`.)
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
