/**
 * Flags ↔ experiments (spec 2.11, 2.14). A typed flag may name an experiment
 * (`defineFlag({experiment})`): the flag serves the arms, and the handler writes the served arm
 * (`flagVariant(ctx, flag)`) on the experiment's rows in its `variantFrom` column. Refusal 4 of
 * spec 7.1 is checked by `flagsPlugin({typedFlags, experiments})`, which reads a `defineExperiment`
 * result structurally; this module never imports the flags area.
 */
import * as Experiment from "./Experiment.js"

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
