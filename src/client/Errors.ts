/**
 * The failures a browser caller can get besides a procedure's own `ProcedureError` (which arrives
 * decoded, with its tag: `Unauthenticated`, `GuardRefused`, `InputInvalid`, ...) and the area
 * errors the client was given (`errors`: `SearchIndexNotFound`, ...).
 */
import { Schema } from "effect"
import type { ProcedureError } from "../app/Errors.js"

/**
 * The connection closed, or could not be opened, before the answer arrived. `sent` says whether the
 * request had left the browser: when true a mutation may or may not have run, so retrying it is the
 * caller's decision; when false it never reached the server.
 */
export class Disconnected extends Schema.TaggedError<Disconnected>()("Disconnected", {
  sent: Schema.Boolean,
  reason: Schema.String
}) {
  override get message() {
    return this.sent
      ? `the connection closed before the answer arrived (the call may have run): ${this.reason}`
      : `could not reach the server (the call was not sent): ${this.reason}`
  }
}

/** The api's `headers` or `authHeaders` function threw or rejected; nothing was sent. */
export class HeadersFailed extends Schema.TaggedError<HeadersFailed>()("HeadersFailed", {
  reason: Schema.String
}) {
  override get message() {
    return `resolving the api's headers failed: ${this.reason}`
  }
}

/**
 * The server answered with something this client cannot read: a malformed frame, a defect, or an
 * output that does not match the procedure's schema (client and server disagree on the procedure).
 */
export class ProtocolError extends Schema.TaggedError<ProtocolError>()("ProtocolError", {
  reason: Schema.String
}) {
  override get message() {
    return `rpc protocol error: ${this.reason}`
  }
}

/** The client was disposed (`mounted.dispose()`) before the call finished. */
export class ClientClosed extends Schema.TaggedError<ClientClosed>()("ClientClosed", {}) {
  override get message() {
    return "the client was disposed"
  }
}

/**
 * Every error a browser call or live query can end with. Switch on `_tag`. `E` is the area errors
 * the client was given (`mount({errors})`).
 */
export type ClientError<E = never> = ProcedureError | E | Disconnected | HeadersFailed | ProtocolError | ClientClosed

/** The `reason` of a client error caused by something thrown: its message, or its text. */
export const reasonOf = (error: unknown): string => error instanceof Error ? error.message : String(error)
