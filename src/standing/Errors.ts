/**
 * Typed errors of the standing primitives.
 */
import { Schema } from "effect"

/** A standing definition the framework refuses at configuration time (thrown by the `define*` functions). */
export class StandingDefinitionError extends Error {
  override readonly name = "StandingDefinitionError"
}

/** A cost that cannot be recorded: a non-finite or negative amount, or an empty tenant or unit. */
export class CostInvalid extends Schema.TaggedError<CostInvalid>()("CostInvalid", {
  message: Schema.String
}) {}
