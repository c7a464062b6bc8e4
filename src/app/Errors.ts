/**
 * The errors a procedure call can fail with on the wire, and their HTTP statuses.
 */
import { Effect, ParseResult, Schema } from "effect"
import * as StoreErrors from "../kernel/Errors.js"
import { FlagDisabled, GuardRefused } from "./Guard.js"

export { FlagDisabled }

/** A handler refused with an explicit status (it failed with `{status, message}`). */
export class ProcedureFailure extends Schema.TaggedError<ProcedureFailure>()("ProcedureFailure", {
  status: Schema.Number,
  message: Schema.String
}) {}

/** The input failed its schema. */
export class InputInvalid extends Schema.TaggedError<InputInvalid>()("InputInvalid", {
  message: Schema.String
}) {}

/** The caller could not be authenticated (a strategy's verdict was `Failed`, or a handler said so). */
export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {
  reason: Schema.String
}) {
  override get message() {
    return `unauthenticated: ${this.reason}`
  }
}

/** No procedure has that tag. */
export class ProcedureNotFound extends Schema.TaggedError<ProcedureNotFound>()("ProcedureNotFound", {
  tag: Schema.String
}) {
  override get message() {
    return `no procedure "${this.tag}"`
  }
}

/** Anything unexpected. The cause is logged with the trace id; the client sees only this. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  message: Schema.String,
  traceId: Schema.String
}) {}

/** Every error a procedure call can fail with, as a wire schema. */
export const ProcedureError = Schema.Union(
  ProcedureFailure,
  InputInvalid,
  Unauthenticated,
  ProcedureNotFound,
  InternalError,
  GuardRefused,
  FlagDisabled,
  StoreErrors.RowNotFound,
  StoreErrors.DuplicateRow,
  StoreErrors.TenantViolation,
  StoreErrors.RowInvalid,
  StoreErrors.UnknownField,
  StoreErrors.StoreUnavailable,
  StoreErrors.ChangeDeliveryFailed,
  StoreErrors.CommitUnknown,
  StoreErrors.StoreWriteDenied
)
/** @see ProcedureError */
export type ProcedureError = typeof ProcedureError.Type

/**
 * A procedure error as the client may see it. A `StoreUnavailable` carries the database's own words
 * (driver message, SQLSTATE): those are logged with the trace id, and the client gets a fixed message.
 */
export const forClient = (error: ProcedureError, traceId: string): Effect.Effect<ProcedureError> =>
  error._tag === "StoreUnavailable"
    ? Effect.as(
      Effect.annotateLogs(Effect.logWarning(`store unavailable: ${error.message}`), { traceId }),
      new StoreErrors.StoreUnavailable({ message: "the database is unavailable; retry later" })
    )
    : Effect.succeed(error)

/** The HTTP status of a procedure error. */
export const statusOf = (error: ProcedureError): number => {
  switch (error._tag) {
    case "ProcedureFailure":
    case "GuardRefused":
      return error.status
    case "InputInvalid":
    case "RowInvalid":
    case "UnknownField":
      return 400
    case "Unauthenticated":
      return 401
    case "TenantViolation":
    case "StoreWriteDenied":
    case "FlagDisabled":
      return 403
    case "ProcedureNotFound":
    case "RowNotFound":
      return 404
    case "DuplicateRow":
      return 409
    case "StoreUnavailable":
      return 503
    case "InternalError":
    case "ChangeDeliveryFailed":
    case "CommitUnknown":
      return 500
  }
}

const maxDescriptionLength = 2000

/**
 * A decode failure as the message a client gets: bounded in size, and never a crash (formatting
 * the value of a deeply nested input overflows the formatter's stack).
 */
export const describeParseError = (error: ParseResult.ParseError): string => {
  try {
    const text = ParseResult.TreeFormatter.formatErrorSync(error)
    return text.length > maxDescriptionLength ? `${text.slice(0, maxDescriptionLength)}…` : text
  } catch {
    return "the input does not match its schema"
  }
}
