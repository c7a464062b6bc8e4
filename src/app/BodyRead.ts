/**
 * Reading a request body within a cap. The errors are shared by every floor that reads bodies;
 * the reader itself is the listener's business, so the server provides it as a service.
 */
import type { HttpServerRequest } from "@effect/platform"
import type { Effect } from "effect"
import { Context, Schema } from "effect"

/** The body exceeded the cap (answered 413). */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  limit: Schema.Number
}) {
  override get message() {
    return `request body exceeds the limit of ${this.limit} bytes`
  }
}

/** The client went away or sent a broken body. */
export class BodyReadFailed extends Schema.TaggedError<BodyReadFailed>()("BodyReadFailed", {
  message: Schema.String
}) {}

/** Reads a request's body, failing `PayloadTooLarge` past `maxBytes` without buffering the rest. */
export class BodyReader extends Context.Tag("@fw/framework/BodyReader")<
  BodyReader,
  (
    request: HttpServerRequest.HttpServerRequest,
    maxBytes: number
  ) => Effect.Effect<Uint8Array, PayloadTooLarge | BodyReadFailed>
>() {}
