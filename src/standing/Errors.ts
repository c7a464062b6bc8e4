/**
 * Typed errors of the standing primitives.
 */
import { Schema } from "effect"

/** A standing definition the framework refuses at configuration time (thrown by the `define*` functions). */
export class StandingDefinitionError extends Error {
  override readonly name = "StandingDefinitionError"
}

/**
 * A flag whose `experiment` cannot be linked (spec 7.1 refusal 4): the experiment is missing, still
 * assigns by subject (no `variantFrom`), carries its own holdout, or names other arms than the flag.
 */
export class FlagExperimentRefused extends Error {
  override readonly name = "FlagExperimentRefused"
  constructor(
    readonly flag: string,
    readonly reason: "missing" | "subjectMode" | "holdout" | "arms",
    message: string
  ) {
    super(message)
  }
}

/** A cost that cannot be recorded: a non-finite or negative amount, or an empty tenant or unit. */
export class CostInvalid extends Schema.TaggedError<CostInvalid>()("CostInvalid", {
  message: Schema.String
}) {}
