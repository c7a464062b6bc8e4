/**
 * Data-quality expectations (spec 2.14, 3.8): `defineExpectation` and the counters that keep an
 * invariant exact per write. Every counter is a function of the rows that satisfy `where`, applied
 * per change as (before, after), so a row that enters or leaves `where` on update moves in or out.
 *
 * `unknown` means nothing can be said: before the first evaluation, a rate with no rows to divide
 * by (`nullRate` over no rows, `valueBounds` over no non-null values), or `freshness` with no
 * timestamp at all.
 */
import { Either, Schema } from "effect"
import * as IsoInstant from "../kernel/schema/IsoInstant.js"
import type * as Table from "../kernel/schema/Table.js"
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

/**
 * Epoch ms of a freshness value: a number (epoch ms), a `Date` or an ISO-8601 string; anything else
 * is no timestamp. A zone-less date-time is read as UTC (as a date alone is), not in the process's
 * local zone, so replicas in different zones agree on a row's age; a day or time that does not
 * exist (2026-02-30) is no timestamp rather than rolled over to another day.
 */
export const timestampOf = (value: unknown): number | null => {
  if (typeof value === "number") return Number.isFinite(value) ? value : null
  if (typeof value === "string") return Either.getOrNull(IsoInstant.parse(value, "utc"))
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
 * deleting the newest row finds the next newest without reading the table again: the count of
 * rows at the newest timestamp, and a map of the older ones (a row stamped "now" touches no map).
 *
 * The invariant's kind, column and bounds are copied into fields of their own: the per-write path
 * reads plain numbers rather than the (differently shaped) invariant objects.
 */
export class Counters {
  matched = 0
  nulls = 0
  nonNull = 0
  outside = 0
  /** Rows per timestamp older than `newest`. */
  private readonly older = new Map<number, number>()
  private newest: number | null = null
  /** Rows stamped `newest`. */
  private newestRows = 0
  private readonly where: ((row: EncodedRow) => boolean) | undefined
  private readonly kind: Invariant["kind"]
  private readonly column: string
  /** `valueBounds`: the bounds (infinite when not given). */
  private readonly min: number
  private readonly max: number
  /** The rate or age above which the invariant is violated. */
  private readonly limit: number
  /** The invariant's threshold: fixed by the definition, so built once (a shared frozen object). */
  readonly threshold: Readonly<Record<string, number>>

  constructor(readonly expectation: Any) {
    // Shared by every evaluation and handed to readers: frozen so none can change another's.
    this.threshold = Object.freeze(thresholdOf(expectation.invariant))
    const where = expectation.where
    if (where !== undefined) {
      const decodeRow = Schema.decodeUnknownSync(expectation.table.schema)
      this.where = (row) => (where as (row: unknown) => boolean)(decodeRow(row))
    } else {
      this.where = undefined
    }
    const invariant = expectation.invariant
    this.kind = invariant.kind
    this.column = invariant.kind === "rowCount" ? "" : invariant.column
    this.min = "min" in invariant && invariant.min !== undefined ? invariant.min : Number.NEGATIVE_INFINITY
    this.max = "max" in invariant && invariant.max !== undefined ? invariant.max : Number.POSITIVE_INFINITY
    this.limit = invariant.kind === "nullRate"
      ? invariant.maxRate
      : invariant.kind === "valueBounds"
      ? invariant.maxViolationRate ?? 0
      : invariant.kind === "freshness"
      ? invariant.maxAgeMs
      : 0
  }

  private stamp(stamp: number, sign: 1 | -1) {
    const newest = this.newest
    if (stamp === newest) {
      this.newestRows += sign
      if (this.newestRows > 0) return
      // The newest rows are gone: the next newest comes out of the older ones.
      let next: number | null = null
      for (const key of this.older.keys()) if (next === null || key > next) next = key
      this.newest = next
      this.newestRows = next === null ? 0 : this.older.get(next)!
      if (next !== null) this.older.delete(next)
      return
    }
    if (sign === 1 && (newest === null || stamp > newest)) {
      if (newest !== null) this.older.set(newest, this.newestRows)
      this.newest = stamp
      this.newestRows = 1
      return
    }
    const count = (this.older.get(stamp) ?? 0) + sign
    if (count <= 0) this.older.delete(stamp)
    else this.older.set(stamp, count)
  }

  private add(row: EncodedRow, sign: 1 | -1) {
    this.matched += sign
    const kind = this.kind
    if (kind === "rowCount") return
    const value = row[this.column]
    if (kind === "freshness") {
      const stamp = timestampOf(value)
      if (stamp !== null) this.stamp(stamp, sign)
      return
    }
    if (value === null || value === undefined) {
      this.nulls += sign
      return
    }
    this.nonNull += sign
    if (kind === "valueBounds" && !(typeof value === "number" && value >= this.min && value <= this.max)) this.outside += sign
  }

  /** Applies a change (a row is `null` on the side where it does not exist). */
  apply(before: EncodedRow | null, after: EncodedRow | null) {
    const where = this.where
    if (before !== null && (where === undefined || where(before))) this.add(before, -1)
    if (after !== null && (where === undefined || where(after))) this.add(after, 1)
  }

  /** The newest timestamp (freshness), or null. */
  get newestStamp(): number | null {
    return this.newest
  }

  /**
   * The status at `now` (epoch ms): the per-write check, which builds nothing (an evaluation object
   * per expectation per write was most of the standing cost of an insert).
   */
  statusAt(now: number): Status {
    switch (this.kind) {
      case "rowCount":
        return this.matched < this.min || this.matched > this.max ? "violated" : "holding"
      case "nullRate":
        if (this.matched === 0) return "unknown"
        return this.nulls / this.matched > this.limit ? "violated" : "holding"
      case "valueBounds":
        if (this.nonNull === 0) return "unknown"
        return this.outside / this.nonNull > this.limit ? "violated" : "holding"
      case "freshness":
        if (this.newest === null) return "unknown"
        return now - this.newest > this.limit ? "violated" : "holding"
    }
  }

  /** The measured value at `now`: the count, the rate or the age in ms; null when the status is `unknown`. */
  metricAt(now: number): number | null {
    switch (this.kind) {
      case "rowCount":
        return this.matched
      case "nullRate":
        return this.matched === 0 ? null : this.nulls / this.matched
      case "valueBounds":
        return this.nonNull === 0 ? null : this.outside / this.nonNull
      case "freshness":
        return this.newest === null ? null : now - this.newest
    }
  }

  /** Evaluates the invariant at `now` (epoch ms). */
  evaluate(now: number): Evaluation {
    return { status: this.statusAt(now), metric: this.metricAt(now), threshold: this.threshold }
  }

  /** When a freshness expectation that holds now ages out (epoch ms), or null. */
  agesOutAt(): number | null {
    const invariant = this.expectation.invariant
    if (invariant.kind !== "freshness" || this.newest === null) return null
    return this.newest + invariant.maxAgeMs + 1
  }
}
