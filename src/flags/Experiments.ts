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
    const differ = armsDiffer(experiment, (flag.definition.variants ?? []).map((variant) => variant.name))
    if (differ !== undefined) throw new FlagDefinitionError(`flag "${flag.key}": ${differ}`)
  }
}

/**
 * Why a flag serving `variants` cannot feed `experiment` (their names differ), or undefined when
 * they match. Also checked for every override of such a flag (see `Entry.candidate`).
 */
export const armsDiffer = (experiment: ExperimentLike, variants: ReadonlyArray<string>): string | undefined => {
  const arms = experiment.variants.map((variant) => variant.name).sort()
  const served = [...variants].sort()
  return arms.length === served.length && arms.every((arm, i) => arm === served[i])
    ? undefined
    : `experiment "${experiment.name}" arms [${arms.join(", ")}] differ from the flag's variants [${served.join(", ")}]`
}

/** The experiment each typed flag feeds, by flag key (only those `experiments` holds). */
export const fedBy = (flags: ReadonlyArray<TypedFlag.Any>, experiments: ReadonlyArray<ExperimentLike>): ReadonlyMap<string, ExperimentLike> => {
  const byName = new Map(experiments.map((experiment) => [experiment.name, experiment]))
  const out = new Map<string, ExperimentLike>()
  for (const flag of flags) {
    const experiment = flag.experiment === undefined ? undefined : byName.get(flag.experiment.name)
    if (experiment !== undefined) out.set(flag.key, experiment)
  }
  return out
}
