/**
 * Refusal 4 of spec 7.1: a flag that names an experiment (`defineFlag({experiment})`) must point at
 * an experiment that reads the arm the flag served. This checks the shape every `defineExperiment`
 * result has (spec 2.14) structurally, so the standing primitives plug in without flags importing them.
 */
import { FlagDefinitionError } from "./Errors.js"
import type * as TypedFlag from "./TypedFlag.js"

/** What the flags plugin reads of an experiment (a `defineExperiment` result satisfies it). */
export interface ExperimentLike {
  readonly name: string
  readonly variants: ReadonlyArray<{ readonly name: string }>
  /** An experiment-side holdout: refused, the flag decides who is exposed. */
  readonly holdout?: number | undefined
  /** The column holding the arm a flag served; without it the experiment assigns by subject itself. */
  readonly variantFrom?: string | undefined
}

/**
 * Throws `FlagDefinitionError` when a typed flag's experiment is missing, still in subject mode,
 * carries a holdout, or has arm names different from the flag's variants.
 */
export const check = (flags: ReadonlyArray<TypedFlag.Any>, experiments: ReadonlyArray<ExperimentLike>): void => {
  const byName = new Map(experiments.map((experiment) => [experiment.name, experiment]))
  for (const flag of flags) {
    if (flag.experiment === undefined) continue
    const name = flag.experiment.name
    const experiment = byName.get(name)
    if (experiment === undefined) {
      throw new FlagDefinitionError(`flag "${flag.key}": experiment "${name}" is not among the plugin's experiments`)
    }
    if (experiment.variantFrom === undefined) {
      throw new FlagDefinitionError(
        `flag "${flag.key}": experiment "${name}" is in subject mode; give it variantFrom (the column holding the arm the flag served)`
      )
    }
    if (experiment.holdout !== undefined && experiment.holdout > 0) {
      throw new FlagDefinitionError(`flag "${flag.key}": experiment "${name}" carries a holdout; the flag's rollout decides exposure`)
    }
    const arms = [...experiment.variants.map((variant) => variant.name)].sort()
    const variants = [...(flag.definition.variants ?? []).map((variant) => variant.name)].sort()
    if (arms.length !== variants.length || arms.some((arm, i) => arm !== variants[i])) {
      throw new FlagDefinitionError(
        `flag "${flag.key}": experiment "${name}" arms [${arms.join(", ")}] differ from the flag's variants [${variants.join(", ")}]`
      )
    }
  }
}
