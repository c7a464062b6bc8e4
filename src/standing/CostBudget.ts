/**
 * Per-tenant cost budgets (spec 2.14, 3.8): `defineCostBudget`, its tumbling windows, and the
 * status a spent amount gives. Budgets observe: they never refuse a call.
 *
 * Window anchor: windows are tumbling and anchored in UTC. A duration (`"1 hour"`, `"7 days"`,
 * milliseconds) is aligned to the Unix epoch: a window starts at a multiple of its length since
 * 1970-01-01T00:00:00Z (so `"1 day"` is a UTC calendar day; `"7 days"` starts on Thursdays). The
 * calendar names `"day"`, `"week"` (from Monday 00:00 UTC) and `"month"` (from the first, 00:00 UTC)
 * follow the UTC calendar. Without `window` the budget is cumulative since the first cost was
 * recorded in the store.
 */
import { Duration } from "effect"
import { StandingDefinitionError } from "./Errors.js"
import type { Severity } from "./Expectation.js"

/** A window: a duration aligned to the epoch, or a UTC calendar unit. */
export type Window = Duration.DurationInput | "day" | "week" | "month"

/** The options of `defineCostBudget`. */
export interface Options {
  readonly name: string
  /** The amount at which the budget is exceeded (positive). */
  readonly limit: number
  /** Count only this unit (e.g. `"recompute"`, `"tokens"`); omitted: the tenant's total across units. */
  readonly unit?: string
  /** Fraction of `limit` at which the budget warns, default 0.8; 1 disables the warning. */
  readonly warnAt?: number
  /** Tumbling window; omitted: cumulative. */
  readonly window?: Window
  /** Alerting priority only. Default `warn`. */
  readonly severity?: Severity
}

/** A defined budget. */
export interface CostBudget {
  readonly _tag: "CostBudget"
  readonly name: string
  readonly limit: number
  readonly unit: string | undefined
  readonly warnAt: number
  readonly window: Window | undefined
  readonly severity: Severity
}

/** The status of a tenant under a budget. */
export type Status = "ok" | "warn" | "exceeded"

const calendar = new Set(["day", "week", "month"])

/**
 * Declares a budget. Throws `StandingDefinitionError` for a limit that is not a positive finite
 * number, `warnAt` outside (0, 1], or a window that is not a positive duration or calendar unit.
 */
export const defineCostBudget = (options: Options): CostBudget => {
  const { name } = options
  if (typeof name !== "string" || name.length === 0) throw new StandingDefinitionError("a cost budget needs a name")
  const refuse = (message: string): never => {
    throw new StandingDefinitionError(`cost budget "${name}": ${message}`)
  }
  if (!Number.isFinite(options.limit) || options.limit <= 0) refuse("limit must be a positive number")
  const warnAt = options.warnAt ?? 0.8
  if (!Number.isFinite(warnAt) || warnAt <= 0 || warnAt > 1) refuse("warnAt must be a fraction in (0, 1]")
  if (options.unit !== undefined && (typeof options.unit !== "string" || options.unit.length === 0)) refuse("unit must be a non-empty string")
  const window = options.window
  if (window !== undefined && !(typeof window === "string" && calendar.has(window))) {
    const decoded = Duration.decodeUnknown(window)
    if (decoded._tag === "None" || !Duration.isFinite(decoded.value) || Duration.toMillis(decoded.value) < 1) {
      refuse(`window must be a positive duration or "day", "week" or "month", got ${JSON.stringify(window)}`)
    }
  }
  return {
    _tag: "CostBudget",
    name,
    limit: options.limit,
    unit: options.unit,
    warnAt,
    window,
    severity: options.severity ?? "warn"
  }
}

/** A window's bounds in epoch ms, `[start, end)`; a cumulative budget has one window from 0 to +∞. */
export interface Bounds {
  readonly start: number
  readonly end: number
}

const day = 86_400_000

/** The window of `budget` that contains `at` (epoch ms). */
export const windowOf = (budget: Pick<CostBudget, "window">, at: number): Bounds => {
  const window = budget.window
  if (window === undefined) return { start: 0, end: Number.POSITIVE_INFINITY }
  if (window === "day") return windowOf({ window: day }, at)
  if (window === "week") {
    // 1970-01-01 was a Thursday: Mondays are 4 days after an epoch-aligned week start.
    const offset = 4 * day
    const start = Math.floor((at - offset) / (7 * day)) * 7 * day + offset
    return { start, end: start + 7 * day }
  }
  if (window === "month") {
    const date = new Date(at)
    const start = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1)
    return { start, end: Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1) }
  }
  const size = Duration.toMillis(Duration.decode(window))
  const start = Math.floor(at / size) * size
  return { start, end: start + size }
}

/** The warning amount (`warnAt × limit`), or null when `warnAt` is 1 (warning disabled). */
export const warnThreshold = (budget: CostBudget): number | null => budget.warnAt >= 1 ? null : budget.warnAt * budget.limit

/** The status `spent` gives under `budget`. */
export const statusOf = (budget: CostBudget, spent: number): Status => {
  if (spent >= budget.limit) return "exceeded"
  const warn = warnThreshold(budget)
  return warn !== null && spent >= warn ? "warn" : "ok"
}

/** True when `unit` counts towards `budget`. */
export const counts = (budget: CostBudget, unit: string): boolean => budget.unit === undefined || budget.unit === unit
