/**
 * Flags ↔ experiments (spec 2.11, 7.1 refusal 4). A typed flag may name an experiment
 * (`defineFlag({experiment})`): the flag serves the arms, and the handler writes the served arm on
 * the experiment's rows in the `variantFrom` column. The flags area calls `checkFlagExperiment`
 * while constructing such a flag; this module never imports the flags area.
 */
import { FlagExperimentRefused } from "./Errors.js"
import * as Experiment from "./Experiment.js"

/** What the flag side knows about a flag that names an experiment. */
export interface FlagSide {
  readonly key: string
  /** The names of the flag's variants. */
  readonly variants: ReadonlyArray<string>
}

/**
 * Refuses (throws `FlagExperimentRefused`) a flag whose experiment is missing, still assigns by
 * subject (no `variantFrom`: the experiment would hash its own arms and disagree with the flag), has
 * its own holdout (the flag decides who is served), or names other arms than the flag's variants.
 * Returns the experiment.
 */
export const checkFlagExperiment = (flag: FlagSide, experiment: Experiment.Any | null | undefined): Experiment.Any => {
  if (experiment === null || experiment === undefined) {
    throw new FlagExperimentRefused(flag.key, "missing", `flag "${flag.key}": its experiment is missing (pass a defineExperiment result)`)
  }
  if (experiment.variantFrom === undefined) {
    throw new FlagExperimentRefused(
      flag.key,
      "subjectMode",
      `flag "${flag.key}": experiment "${experiment.name}" assigns arms by subject; give it variantFrom (the column holding the arm the flag served)`
    )
  }
  if (experiment.holdout > 0) {
    throw new FlagExperimentRefused(
      flag.key,
      "holdout",
      `flag "${flag.key}": experiment "${experiment.name}" has its own holdout (${experiment.holdout}); the flag decides who is served`
    )
  }
  const arms = experiment.variants.map((variant) => variant.name).sort()
  const served = [...flag.variants].sort()
  if (arms.length !== served.length || arms.some((arm, i) => arm !== served[i])) {
    throw new FlagExperimentRefused(
      flag.key,
      "arms",
      `flag "${flag.key}": experiment "${experiment.name}" has arms [${arms.join(", ")}] but the flag serves [${served.join(", ")}]`
    )
  }
  return experiment
}

/**
 * The arm a row records in the experiment's `variantFrom` column (what the flag served), or null
 * when the row carries none or names an arm the experiment does not have.
 */
export const variantFrom = (experiment: Experiment.Any, row: Readonly<Record<string, unknown>>): string | null => {
  if (experiment.variantFrom === undefined) return null
  const served = row[experiment.variantFrom]
  return typeof served === "string" && experiment.variants.some((variant) => variant.name === served) ? served : null
}

/** The arm of a row: `variantFrom` in flag mode, `assignVariant` of its unit in subject mode. */
export const armOf = (experiment: Experiment.Any, row: Readonly<Record<string, unknown>>, unit: string): string | null =>
  experiment.variantFrom === undefined ? Experiment.assignVariant(experiment, unit) : variantFrom(experiment, row)
