/**
 * The flags plugin's typed errors. `FlagDisabled` lives in the app layer (it is part of every
 * procedure's wire-error union) and is re-exported here.
 */
import { Schema } from "effect"
export { FlagDisabled } from "../app/Guard.js"

/** A flag definition or plugin option the framework refuses at construction (spec 7.1, refusals 1–4). */
export class FlagDefinitionError extends Error {
  override readonly name = "FlagDefinitionError"
}

/** No flag has that key. */
export class FlagNotFound extends Schema.TaggedError<FlagNotFound>()("FlagNotFound", {
  flag: Schema.String
}) {
  override get message() {
    return `no flag "${this.flag}"`
  }
}

/**
 * An override was refused whole (spec 7.1 #10): the code-declared definition stands. The refusal
 * is logged and listed by the inspect `list` route.
 */
export class OverrideRefused extends Schema.TaggedError<OverrideRefused>()("OverrideRefused", {
  flag: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `override of flag "${this.flag}" refused: ${this.reason}`
  }
}

/** Flag state could not be persisted or read (the SQL store failed). */
export class FlagStoreFailed extends Schema.TaggedError<FlagStoreFailed>()("FlagStoreFailed", {
  message: Schema.String
}) {}

/** A store failure as the flags surface reports it. */
export const storeFailed = (error: { readonly message: string }) => new FlagStoreFailed({ message: error.message })
