/**
 * The errors a procedure call can fail with on the wire, and their HTTP statuses.
 */
import { Effect, ParseResult, Schema } from "effect"
import * as StoreErrors from "../kernel/Errors.js"
import * as LogText from "../kernel/LogText.js"
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
  StoreErrors.StoreWriteDenied,
  StoreErrors.TableNotDeclared
)
/** @see ProcedureError */
export type ProcedureError = typeof ProcedureError.Type

/**
 * An area's typed error as it travels: a tagged error whose instances carry their HTTP status
 * (`SearchIndexNotFound` 404, ...). An area lists its error classes (`Plugin.errors`); the app's
 * wire schema (`wireError`) then carries them with their own tag instead of a `ProcedureFailure`.
 */
export interface AreaError {
  readonly _tag: string
  readonly message: string
  readonly status: number
}

/**
 * An area error class: a `Schema.TaggedError` class (its static `_tag` names it) whose instances
 * have a `status` (400–599).
 */
export type AreaErrorClass = Schema.Schema.AnyNoContext & { readonly _tag: string }

/** What a procedure call can fail with on the wire: the framework's errors or a declared area error. */
export type WireError = ProcedureError | AreaError

/** The tags of the framework's own wire errors, which no area error may take. */
export const procedureErrorTags: ReadonlySet<string> = new Set(
  ProcedureError.members.map((member) => member._tag)
)

/** Two error classes claim one tag, or an area error takes a framework tag. */
export class ErrorTagCollision extends Error {
  override readonly name = "ErrorTagCollision"
}

/**
 * The area error classes of `errors`, each once, checked: no tag of the framework's own errors,
 * no two distinct classes with one tag (the client could not tell them apart).
 */
export const checkAreaErrors = (errors: Iterable<AreaErrorClass>): ReadonlyArray<AreaErrorClass> => {
  const byTag = new Map<string, AreaErrorClass>()
  for (const error of errors) {
    const tag = error._tag
    if (typeof tag !== "string" || tag === "") throw new ErrorTagCollision("an area error class has no _tag (use Schema.TaggedError)")
    if (procedureErrorTags.has(tag)) {
      throw new ErrorTagCollision(`area error "${tag}" takes the tag of a framework error`)
    }
    const known = byTag.get(tag)
    if (known !== undefined && known !== error) {
      throw new ErrorTagCollision(`two different error classes are declared with the tag "${tag}"`)
    }
    byTag.set(tag, error)
  }
  return [...byTag.values()]
}

/**
 * The wire schema of the errors a call can fail with: `ProcedureError` and the given area error
 * classes (checked by `checkAreaErrors`). Server and client must be built with the same classes.
 */
export const wireError = (areaErrors: ReadonlyArray<AreaErrorClass> = []): Schema.Schema<WireError, unknown> => {
  const checked = checkAreaErrors(areaErrors)
  return checked.length === 0 ? ProcedureError as Schema.Schema<WireError, unknown> : Schema.Union(ProcedureError, ...checked)
}

/** A recogniser of the given area errors' instances (their own schema's `is`). */
export const isAreaErrorOf = (areaErrors: ReadonlyArray<AreaErrorClass>): (error: unknown) => error is AreaError => {
  if (areaErrors.length === 0) return (_error): _error is AreaError => false
  const is = Schema.is(Schema.Union(...areaErrors))
  return (error): error is AreaError => is(error) && isStatus((error as { readonly status?: unknown }).status)
}

const isStatus = (status: unknown): status is number =>
  typeof status === "number" && Number.isInteger(status) && status >= 400 && status < 600

const isFrameworkError = Schema.is(ProcedureError)

/**
 * A procedure error as the client may see it. A `StoreUnavailable` carries the database's own words
 * (driver message, SQLSTATE): those are logged with the trace id, and the client gets a fixed message.
 * A `TableNotDeclared` is the app's own mistake: logged as an error with the trace id, and answered
 * as it is (500, naming the table), so the developer calling the app sees what to fix.
 */
export const forClient = <E extends WireError>(error: E, traceId: string): Effect.Effect<E | ProcedureError> =>
  error._tag === "TableNotDeclared"
    // The app's own mistake: the log says it where the operator looks, the caller gets it typed.
    ? Effect.as(Effect.annotateLogs(Effect.logError(error.message), { traceId }), error)
    : error._tag === "StoreUnavailable"
    ? Effect.as(
      Effect.annotateLogs(Effect.logWarning(`store unavailable: ${LogText.quote(error.message)}`), { traceId }),
      new StoreErrors.StoreUnavailable({ message: "the database is unavailable; retry later" })
    )
    : Effect.succeed(error)

/** The HTTP status of a wire error (an area error's own, 500 if it has none). */
export const statusOf = (error: WireError): number => {
  if (!isFrameworkError(error)) return isStatus(error.status) ? error.status : 500
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
    case "TableNotDeclared":
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
