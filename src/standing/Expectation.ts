/**
 * Data-quality expectations (spec 2.14, 3.8): `defineExpectation` and the counters that keep an
 * invariant exact per write. Every counter is a function of the rows that satisfy `where`, applied
 * per change as (before, after), so a row that enters or leaves `where` on update moves in or out.
 *
 * `unknown` means nothing can be said: before the first evaluation, a rate with no rows to divide
 * by (`nullRate` over no rows, `valueBounds` over no non-null values), or `freshness` with no
 * timestamp at all.
 */
import { Schema } from "effect"
import type * as Table from "../kernel/Table.js"
import { StandingDefinitionError } from "./Errors.js"
import type { EncodedRow } from "./Experiment.js"

/** The four invariant kinds (spec 2.14). */
export type Invariant =
  | { readonly kind: "freshness"; readonly column: string; readonly maxAgeMs: number }
  | { readonly kind: "nullRate"; readonly column: string; readonly maxRate: number }
  | { readonly kind: "rowCount"; readonly min?: number; readonly max?: number }
  | {
    readonly kind: "valueBounds"
    readonly column: string
    readonly min?: number
    readonly max?: number
    /** Fraction of non-null values allowed outside [min, max] (default 0). */
    readonly maxViolationRate?: number
  }

/** Alerting priority only: a severity never changes evaluation. */
export type Severity = "info" | "warn" | "critical"

/** The options of `defineExpectation`. */
export interface Options<T extends Table.Any> {
  readonly name: string
  readonly on: { readonly table: T; readonly where?: (row: Table.Row<T>) => boolean }
  readonly invariant: Invariant
  /** Default `warn`. */
  readonly severity?: Severity
}

/** A defined expectation. */
export interface Expectation<T extends Table.Any = Table.Any> {
  readonly _tag: "Expectation"
  readonly name: string
  readonly table: T
  readonly where: ((row: Table.Row<T>) => boolean) | undefined
  readonly invariant: Invariant
  readonly severity: Severity
}

/** Any expectation. */
export type Any = Expectation<Table.Any>

const fraction = (value: number) => Number.isFinite(value) && value >= 0 && value <= 1

/**
 * Declares an expectation. Throws `StandingDefinitionError` for an unknown column, a rate outside
 * [0, 1], a non-positive `maxAgeMs`, or bounds that are missing or inverted.
 */
export const defineExpectation = <T extends Table.Any>(options: Options<T>): Expectation<T> => {
  const { name, invariant } = options
  if (typeof name !== "string" || name.length === 0) throw new StandingDefinitionError("an expectation needs a name")
  const refuse = (message: string): never => {
    throw new StandingDefinitionError(`expectation "${name}": ${message}`)
  }
  const table = options.on.table
  if ("column" in invariant && invariant.column !== "id" && !(invariant.column in table.fields)) {
    refuse(`"${invariant.column}" is not a column of "${table.name}"`)
  }
  const bounds = (min: number | undefined, max: number | undefined) => {
    if (min === undefined && max === undefined) refuse("give min, max or both")
    for (const bound of [min, max]) if (bound !== undefined && !Number.isFinite(bound)) refuse("bounds must be finite numbers")
    if (min !== undefined && max !== undefined && min > max) refuse(`min ${min} is above max ${max}`)
  }
  switch (invariant.kind) {
    case "freshness":
      if (!Number.isFinite(invariant.maxAgeMs) || invariant.maxAgeMs <= 0) refuse("maxAgeMs must be a positive number")
      break
    case "nullRate":
      if (!fraction(invariant.maxRate)) refuse("maxRate must be in [0, 1]")
      break
    case "rowCount":
      bounds(invariant.min, invariant.max)
      break
    case "valueBounds":
      bounds(invariant.min, invariant.max)
      if (invariant.maxViolationRate !== undefined && !fraction(invariant.maxViolationRate)) {
        refuse("maxViolationRate must be in [0, 1]")
      }
      break
    default:
      refuse(`unknown invariant kind "${(invariant as { readonly kind: unknown }).kind}"`)
  }
  return {
    _tag: "Expectation",
    name,
    table,
    where: options.on.where,
    invariant,
    severity: options.severity ?? "warn"
  }
}

/** The status of an expectation (spec 2.14). */
export type Status = "holding" | "violated" | "unknown"

/** What one evaluation says. `metric` is the measured value (count, rate or age in ms). */
export interface Evaluation {
  readonly status: Status
  readonly metric: number | null
  readonly threshold: Readonly<Record<string, number>>
}

/** Epoch ms of a freshness value: a number (epoch ms) or a date string; anything else is no timestamp. */
export const timestampOf = (value: unknown): number | null => {
  if (typeof value === "number") return Number.isFinite(value) ? value : null
  if (typeof value === "string") {
    const parsed = Date.parse(value)
    return Number.isNaN(parsed) ? null : parsed
  }
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.getTime()
  return null
}

/** The threshold an invariant is held to, as reported with each evaluation (only the bounds given). */
const thresholdOf = (invariant: Invariant): Readonly<Record<string, number>> => {
  const bounds = (min: number | undefined, max: number | undefined) => {
    const threshold: Record<string, number> = {}
    if (min !== undefined) threshold["min"] = min
    if (max !== undefined) threshold["max"] = max
    return threshold
  }
  switch (invariant.kind) {
    case "rowCount":
      return bounds(invariant.min, invariant.max)
    case "nullRate":
      return { maxRate: invariant.maxRate }
    case "valueBounds":
      return { ...bounds(invariant.min, invariant.max), maxViolationRate: invariant.maxViolationRate ?? 0 }
    case "freshness":
      return { maxAgeMs: invariant.maxAgeMs }
  }
}

/**
 * The counters of one expectation. A freshness expectation keeps a multiset of timestamps, so
 * deleting the newest row finds the next newest without reading the table again.
 */
export class Counters {
  matched = 0
  nulls = 0
  nonNull = 0
  outside = 0
  private readonly stamps = new Map<number, number>()
  private newest: number | null = null
  private readonly decode: ((row: EncodedRow) => unknown) | undefined
  /** The invariant's threshold: fixed by the definition, so built once rather than per evaluation (per write). */
  private readonly threshold: Readonly<Record<string, number>>

  constructor(readonly expectation: Any) {
    // Shared by every evaluation and handed to readers: frozen so none can change another's.
    this.threshold = Object.freeze(thresholdOf(expectation.invariant))
    if (expectation.where !== undefined) {
      const decodeRow = Schema.decodeUnknownSync(expectation.table.schema)
      this.decode = (row) => decodeRow(row)
    } else {
      this.decode = undefined
    }
  }

  private matches(row: EncodedRow | null): row is EncodedRow {
    if (row === null) return false
    const where = this.expectation.where
    return where === undefined || (where as (row: unknown) => boolean)(this.decode!(row))
  }

  private add(row: EncodedRow, sign: 1 | -1) {
    this.matched += sign
    const invariant = this.expectation.invariant
    if (invariant.kind === "rowCount") return
    const value = row[invariant.column]
    if (invariant.kind === "freshness") {
      const stamp = timestampOf(value)
      if (stamp === null) return
      const count = (this.stamps.get(stamp) ?? 0) + sign
      if (count <= 0) this.stamps.delete(stamp)
      else this.stamps.set(stamp, count)
      if (sign === 1 && (this.newest === null || stamp > this.newest)) this.newest = stamp
      if (sign === -1 && count <= 0 && stamp === this.newest) {
        let next: number | null = null
        for (const key of this.stamps.keys()) if (next === null || key > next) next = key
        this.newest = next
      }
      return
    }
    if (value === null || value === undefined) {
      this.nulls += sign
      return
    }
    this.nonNull += sign
    if (invariant.kind === "valueBounds") {
      const number = typeof value === "number" ? value : Number.NaN
      const out = Number.isNaN(number) ||
        (invariant.min !== undefined && number < invariant.min) ||
        (invariant.max !== undefined && number > invariant.max)
      if (out) this.outside += sign
    }
  }

  /** Applies a change (a row is `null` on the side where it does not exist). */
  apply(before: EncodedRow | null, after: EncodedRow | null) {
    if (this.matches(before)) this.add(before, -1)
    if (this.matches(after)) this.add(after, 1)
  }

  /** The newest timestamp (freshness), or null. */
  get newestStamp(): number | null {
    return this.newest
  }

  /** Evaluates the invariant at `now` (epoch ms). */
  evaluate(now: number): Evaluation {
    const invariant = this.expectation.invariant
    const threshold = this.threshold
    switch (invariant.kind) {
      case "rowCount": {
        const broken = (invariant.min !== undefined && this.matched < invariant.min) ||
          (invariant.max !== undefined && this.matched > invariant.max)
        return { status: broken ? "violated" : "holding", metric: this.matched, threshold }
      }
      case "nullRate": {
        if (this.matched === 0) return { status: "unknown", metric: null, threshold }
        const rate = this.nulls / this.matched
        return { status: rate > invariant.maxRate ? "violated" : "holding", metric: rate, threshold }
      }
      case "valueBounds": {
        if (this.nonNull === 0) return { status: "unknown", metric: null, threshold }
        const rate = this.outside / this.nonNull
        return { status: rate > (invariant.maxViolationRate ?? 0) ? "violated" : "holding", metric: rate, threshold }
      }
      case "freshness": {
        if (this.newest === null) return { status: "unknown", metric: null, threshold }
        const age = now - this.newest
        return { status: age > invariant.maxAgeMs ? "violated" : "holding", metric: age, threshold }
      }
    }
  }

  /** When a freshness expectation that holds now ages out (epoch ms), or null. */
  agesOutAt(): number | null {
    const invariant = this.expectation.invariant
    if (invariant.kind !== "freshness" || this.newest === null) return null
    return this.newest + invariant.maxAgeMs + 1
  }
}
