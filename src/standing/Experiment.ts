/**
 * Live experiments (spec 2.14): `defineExperiment`, the pure `assignVariant`, and the incremental
 * tally that turns the rows of the experiment's table into the readout.
 *
 * Decisions (DESIGN "Experiments"): metrics are per exposed unit; a unit is exposed by its first
 * row that names an arm (in subject mode every row does: the arm comes from `assignVariant`; with
 * `variantFrom` it is the arm a flag served, written on the row), and only rows that name an arm
 * count, so a unit's rows from before its exposure do not. A unit whose rows name two arms is a
 * crossover: it is left out of every arm and counted apart. `lift` is null on a zero baseline, and
 * the readout carries a sample-ratio-mismatch check.
 */
import { Schema } from "effect"
import type * as Table from "../kernel/schema/Table.js"
import { StandingDefinitionError } from "./Errors.js"
import * as Hash from "./Hash.js"
import * as Srm from "./Srm.js"

/** An experiment metric (spec 2.14). */
export type Metric =
  | { readonly kind: "count" }
  | { readonly kind: "sum"; readonly column: string }
  | { readonly kind: "avg"; readonly column: string }
  | { readonly kind: "conversionRate"; readonly column: string; readonly equals?: unknown }

/** An arm: a name and a relative weight (default 1). */
export interface Variant {
  readonly name: string
  readonly weight?: number
}

/** A row as delivered by the change tap (encoded, JSON-safe). */
export type EncodedRow = Readonly<Record<string, unknown>>

/** The options of `defineExperiment`. */
export interface Options<T extends Table.Any> {
  readonly name: string
  readonly on: { readonly table: T }
  /** The unit column, or a function of the (decoded) row returning the unit id (null: not a unit's row). */
  readonly subject: (keyof Table.Row<T> & string) | ((row: Table.Row<T>) => string | null | undefined)
  /** At least two arms. */
  readonly variants: ReadonlyArray<Variant>
  /** Fraction of units held out of every arm, in [0, 1) (default 0). */
  readonly holdout?: number
  readonly metric: Metric
  /** The arm others are compared with (default the first). */
  readonly baseline?: string
  /** The column holding the arm a flag served (flag mode); without it arms come from `assignVariant`. */
  readonly variantFrom?: keyof Table.Row<T> & string
}

/** A defined experiment. */
export interface Experiment<T extends Table.Any = Table.Any> {
  readonly _tag: "Experiment"
  readonly name: string
  readonly table: T
  readonly subject: Options<T>["subject"]
  readonly variants: ReadonlyArray<{ readonly name: string; readonly weight: number }>
  readonly holdout: number
  readonly metric: Metric
  readonly baseline: string
  readonly variantFrom: string | undefined
  /** The seed of `assignVariant`, distinct from any flag seed. */
  readonly salt: string
}

/** Any experiment (the registry holds experiments on different tables). */
export type Any = Experiment<Table.Any>

/** The name of the holdout arm in readouts and in `assignVariant`'s answer. */
export const holdoutArm = "holdout"

/** The seed experiments hash with (a flag's rollout uses seed 0: the arms never align with a rollout). */
export const seed = 0x5eed_e4e1

const columnOf = (table: Table.Any, column: string, what: string, name: string) => {
  if (column !== "id" && !(column in table.fields)) {
    throw new StandingDefinitionError(`experiment "${name}": ${what} "${column}" is not a column of "${table.name}"`)
  }
}

/**
 * Declares an experiment. Throws `StandingDefinitionError` for fewer than two arms, duplicate or
 * reserved arm names, a weight that is not a positive finite number, a holdout outside [0, 1),
 * an unknown baseline, or a column the table does not have.
 */
export const defineExperiment = <T extends Table.Any>(options: Options<T>): Experiment<T> => {
  const name = options.name
  if (typeof name !== "string" || name.length === 0) throw new StandingDefinitionError("an experiment needs a name")
  if (options.variants.length < 2) throw new StandingDefinitionError(`experiment "${name}": at least two variants are needed`)
  const names = new Set<string>()
  const variants = options.variants.map((variant) => {
    const weight = variant.weight ?? 1
    if (typeof variant.name !== "string" || variant.name.length === 0) {
      throw new StandingDefinitionError(`experiment "${name}": a variant needs a name`)
    }
    if (names.has(variant.name)) throw new StandingDefinitionError(`experiment "${name}": variant "${variant.name}" is declared twice`)
    if (variant.name === holdoutArm) {
      throw new StandingDefinitionError(`experiment "${name}": "${holdoutArm}" is reserved for the holdout arm`)
    }
    if (!Number.isFinite(weight) || weight <= 0) {
      throw new StandingDefinitionError(`experiment "${name}": variant "${variant.name}" needs a positive finite weight`)
    }
    names.add(variant.name)
    return { name: variant.name, weight }
  })
  const holdout = options.holdout ?? 0
  if (!Number.isFinite(holdout) || holdout < 0 || holdout >= 1) {
    throw new StandingDefinitionError(`experiment "${name}": holdout must be a fraction in [0, 1), got ${holdout}`)
  }
  const baseline = options.baseline ?? variants[0]!.name
  if (!names.has(baseline)) throw new StandingDefinitionError(`experiment "${name}": baseline "${baseline}" is not a variant`)
  const table = options.on.table
  if (typeof options.subject === "string") columnOf(table, options.subject, "subject column", name)
  if (options.variantFrom !== undefined) columnOf(table, options.variantFrom, "variantFrom column", name)
  if (options.metric.kind !== "count") columnOf(table, options.metric.column, "metric column", name)
  return {
    _tag: "Experiment",
    name,
    table,
    subject: options.subject,
    variants,
    holdout,
    metric: options.metric,
    baseline,
    variantFrom: options.variantFrom,
    salt: `fw-experiment:${name}`
  }
}

/**
 * The arm of `subject` in `experiment`: deterministic (MurmurHash3 of `<salt>:<subject>` with the
 * experiment seed, as a number in [0, 1)). The holdout takes the bottom `holdout` of that range;
 * the rest is rescaled to [0, 1) and cut by the weights, so the arms keep their exact proportions.
 * Answers `"holdout"` for a held-out unit.
 */
export const assignVariant = (experiment: Pick<Any, "salt" | "variants" | "holdout">, subject: string): string => {
  const u = Hash.unit(`${experiment.salt}:${subject}`, seed)
  if (u < experiment.holdout) return holdoutArm
  const scaled = (u - experiment.holdout) / (1 - experiment.holdout)
  const total = experiment.variants.reduce((sum, variant) => sum + variant.weight, 0)
  let edge = 0
  for (const variant of experiment.variants) {
    edge += variant.weight / total
    if (scaled < edge) return variant.name
  }
  return experiment.variants[experiment.variants.length - 1]!.name
}

/** The expected share of each arm (holdout first when there is one), summing to 1. */
export const expectedShares = (experiment: Any): ReadonlyArray<{ readonly arm: string; readonly share: number }> => {
  const total = experiment.variants.reduce((sum, variant) => sum + variant.weight, 0)
  return [
    ...(experiment.holdout > 0 ? [{ arm: holdoutArm, share: experiment.holdout }] : []),
    ...experiment.variants.map((variant) => ({ arm: variant.name, share: (1 - experiment.holdout) * variant.weight / total }))
  ]
}

/** One arm of a readout. `metric` is null without exposed units (or, for `avg`, without values). */
export interface ArmReadout {
  readonly variant: string
  readonly isBaseline: boolean
  readonly isHoldout: boolean
  /** Exposed units. */
  readonly exposure: number
  /** The share of exposed units the weights expect. */
  readonly expectedShare: number
  readonly metric: number | null
  /** (metric − baseline metric) / baseline metric; null for the baseline and when the baseline metric is 0 or null. */
  readonly lift: number | null
  /** metric − baseline metric; null for the baseline and when either is null. */
  readonly diff: number | null
  /** Rows counted for this arm. */
  readonly rows: number
}

/** The readout of 2.14, plus the sample-ratio-mismatch check and the crossover count. */
export interface Readout {
  readonly name: string
  readonly metric: Metric["kind"]
  readonly totalExposure: number
  readonly baseline: string
  readonly variants: ReadonlyArray<ArmReadout>
  readonly srm: Srm.Result
  /** Units whose rows name more than one arm (left out of every arm). */
  readonly crossovers: number
  /** Time of the last change applied (epoch ms), null before any. */
  readonly lastUpdatedAt: number | null
}

interface UnitTally {
  /** Subject mode: the unit's arm from `assignVariant`. */
  assigned: string | undefined
  /** Counted rows per arm named. */
  readonly arms: Map<string, number>
  /** The key of `arms` when it has exactly one (kept as it changes: no iterator per write). */
  only: string | undefined
  rows: number
  sum: number
  valueSum: number
  values: number
  converting: number
}

interface ArmTally {
  exposure: number
  rows: number
  sum: number
  valueSum: number
  values: number
  converted: number
}

/**
 * What one side of a change (the row before or after) contributes: a slot the tally reuses for
 * every write (two per tally), filled by `read` before anything is counted.
 */
interface Contribution {
  unit: string
  arm: string
  value: number | null
  converting: boolean
}

const numberOf = (value: unknown): number | null => typeof value === "number" && Number.isFinite(value) ? value : null

/** A unit whose rows name more than one arm (not an arm name: any string may name an arm). */
const crossover = Symbol("crossover")

/**
 * The incremental state of one experiment: apply each change as (before, after); boot applies every
 * row as an insert. The state is a function of the table's rows alone, so replicas that apply the
 * same changes agree, and a restart rebuilds it exactly.
 */
export class Tally {
  private readonly units = new Map<string, UnitTally>()
  private readonly arms = new Map<string, ArmTally>()
  private readonly known: ReadonlySet<string>
  private readonly decode: (row: EncodedRow) => unknown
  private crossoverCount = 0
  /** The contributions of the change being applied (reused: a write allocates none). */
  private readonly removed: Contribution = { unit: "", arm: "", value: null, converting: false }
  private readonly added: Contribution = { unit: "", arm: "", value: null, converting: false }
  lastUpdatedAt: number | null = null

  constructor(readonly experiment: Any) {
    this.known = new Set([...(experiment.holdout > 0 ? [holdoutArm] : []), ...experiment.variants.map((v) => v.name)])
    for (const arm of this.known) this.arms.set(arm, { exposure: 0, rows: 0, sum: 0, valueSum: 0, values: 0, converted: 0 })
    const decodeRow = Schema.decodeUnknownSync(experiment.table.schema)
    this.decode = (row) => decodeRow(row)
  }

  /** Fills `into` with what `row` contributes; false when it contributes nothing (no row, no unit, no known arm). */
  private read(row: EncodedRow | null, into: Contribution): boolean {
    if (row === null) return false
    const experiment = this.experiment
    const rawUnit = typeof experiment.subject === "string"
      ? row[experiment.subject]
      : (experiment.subject as (row: unknown) => unknown)(this.decode(row))
    if (rawUnit === null || rawUnit === undefined || rawUnit === "") return false
    const unit = typeof rawUnit === "string" ? rawUnit : String(rawUnit)
    let arm: string
    if (experiment.variantFrom === undefined) {
      // The arm of a unit never changes: hash it once per tallied unit.
      arm = this.units.get(unit)?.assigned ?? assignVariant(experiment, unit)
    } else {
      const served = row[experiment.variantFrom]
      if (typeof served !== "string" || !this.known.has(served)) return false
      arm = served
    }
    into.unit = unit
    into.arm = arm
    const metric = experiment.metric
    switch (metric.kind) {
      case "count":
        into.value = null
        into.converting = false
        break
      case "sum":
      case "avg":
        into.value = numberOf(row[metric.column])
        into.converting = false
        break
      case "conversionRate": {
        const value = row[metric.column]
        into.value = null
        into.converting = "equals" in metric ? value === metric.equals : Boolean(value)
        break
      }
    }
    return true
  }

  /** The arm a unit is exposed in, or null (not exposed), or `crossover`. */
  private armOf(unit: UnitTally): string | null | typeof crossover {
    const size = unit.arms.size
    if (size === 0) return null
    if (size > 1) return crossover
    return unit.only!
  }

  private move(unit: UnitTally, arm: string, sign: 1 | -1) {
    const tally = this.arms.get(arm)!
    tally.exposure += sign
    tally.rows += sign * unit.rows
    tally.sum += sign * unit.sum
    tally.valueSum += sign * unit.valueSum
    tally.values += sign * unit.values
    tally.converted += sign * (unit.converting > 0 ? 1 : 0)
  }

  /** Adds (`sign` 1) or removes (-1) a row's contribution: the unit leaves its arm's totals, changes, and re-enters. */
  private add(contribution: Contribution, sign: 1 | -1) {
    const name = contribution.unit
    let unit = this.units.get(name)
    if (unit === undefined) {
      unit = { assigned: undefined, arms: new Map(), only: undefined, rows: 0, sum: 0, valueSum: 0, values: 0, converting: 0 }
      this.units.set(name, unit)
    }
    const before = this.armOf(unit)
    if (before === crossover) this.crossoverCount -= 1
    else if (before !== null) this.move(unit, before, -1)
    if (this.experiment.variantFrom === undefined) unit.assigned = contribution.arm
    const rows = (unit.arms.get(contribution.arm) ?? 0) + sign
    if (rows === 0) unit.arms.delete(contribution.arm)
    else unit.arms.set(contribution.arm, rows)
    // The one arm left: the one just counted, or (after its last row went) the other one.
    if (unit.arms.size === 1) unit.only = rows === 0 ? unit.arms.keys().next().value! : contribution.arm
    unit.rows += sign
    if (contribution.value !== null) {
      unit.sum += sign * contribution.value
      unit.valueSum += sign * contribution.value
      unit.values += sign
    }
    if (contribution.converting) unit.converting += sign
    const after = this.armOf(unit)
    if (after === crossover) this.crossoverCount += 1
    else if (after !== null) this.move(unit, after, 1)
    if (unit.rows === 0) this.units.delete(name)
  }

  /** Applies one change of the experiment's table (a row is `null` on the side it does not exist). */
  apply(before: EncodedRow | null, after: EncodedRow | null, at: number) {
    // Both sides are read before anything is counted: a subject function that throws changes nothing.
    const removes = this.read(before, this.removed)
    const adds = this.read(after, this.added)
    if (removes) this.add(this.removed, -1)
    if (adds) this.add(this.added, 1)
    this.lastUpdatedAt = Math.max(this.lastUpdatedAt ?? at, at)
  }

  private metricOf(tally: ArmTally): number | null {
    if (tally.exposure === 0) return null
    switch (this.experiment.metric.kind) {
      case "count":
        return tally.rows / tally.exposure
      case "sum":
        return tally.sum / tally.exposure
      case "avg":
        return tally.values === 0 ? null : tally.valueSum / tally.values
      case "conversionRate":
        return tally.converted / tally.exposure
    }
  }

  /** The readout (spec 2.14). */
  readout(): Readout {
    const experiment = this.experiment
    const shares = expectedShares(experiment)
    const base = this.metricOf(this.arms.get(experiment.baseline)!)
    const variants = shares.map(({ arm, share }): ArmReadout => {
      const tally = this.arms.get(arm)!
      const metric = this.metricOf(tally)
      const isBaseline = arm === experiment.baseline
      return {
        variant: arm,
        isBaseline,
        isHoldout: arm === holdoutArm,
        exposure: tally.exposure,
        expectedShare: share,
        metric,
        lift: isBaseline || metric === null || base === null || base === 0 ? null : (metric - base) / base,
        diff: isBaseline || metric === null || base === null ? null : metric - base,
        rows: tally.rows
      }
    })
    return {
      name: experiment.name,
      metric: experiment.metric.kind,
      totalExposure: variants.reduce((sum, arm) => sum + arm.exposure, 0),
      baseline: experiment.baseline,
      variants,
      srm: Srm.check(variants.map((arm) => ({ observed: arm.exposure, expectedShare: arm.expectedShare }))),
      crossovers: this.crossoverCount,
      lastUpdatedAt: this.lastUpdatedAt
    }
  }
}
