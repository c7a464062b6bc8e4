/**
 * The standing primitives in words and intervals, for the dashboard: an expectation's metric
 * against its threshold ("2.5% of rows have no email; at most 1% allowed"), the write behind its
 * last transition, an experiment arm's lift with a 95 % confidence interval, and the
 * sample-ratio-mismatch check stated as a sentence.
 */
import type { Experiment, Readout } from "./Experiment.js"
import type { Cause, ExpectationObservation } from "./Registries.js"
import type * as Srm from "./Srm.js"

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.000Z$/, "Z")
const pct = (rate: number) => `${Number((rate * 100).toFixed(2))}%`

/** A duration as people say it: "45 s", "3 min", "2 h 5 min", "3 days". */
export const age = (ms: number): string => {
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s} s`
  const min = Math.floor(s / 60)
  if (min < 60) return `${min} min`
  const h = Math.floor(min / 60)
  if (h < 48) return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`
  return `${Math.floor(h / 24)} days`
}

/** The definition details the observation does not carry (the column measured). */
export interface ExpectationShape {
  readonly column: string | null
}

/** An expectation's metric and threshold as sentences. */
export const expectation = (observation: ExpectationObservation, shape: ExpectationShape): { readonly metric: string; readonly threshold: string } => {
  const { metric, threshold } = observation
  const column = shape.column ?? "the column"
  const bounds = (unit: string, min: number | undefined, max: number | undefined) =>
    min !== undefined && max !== undefined
      ? `between ${min} and ${max}${unit}`
      : min !== undefined
      ? `at least ${min}${unit}`
      : max !== undefined
      ? `at most ${max}${unit}`
      : "no bound"
  switch (observation.kind) {
    case "rowCount":
      return {
        metric: metric === null ? "not measured yet" : `${metric} row${metric === 1 ? "" : "s"}`,
        threshold: `${bounds(" rows", threshold["min"], threshold["max"])} expected`
      }
    case "nullRate":
      return {
        metric: metric === null ? "not measured yet (no rows)" : `${pct(metric)} of rows have no ${column}`,
        threshold: `at most ${pct(threshold["maxRate"] ?? 0)} allowed`
      }
    case "valueBounds":
      return {
        metric: metric === null ? `not measured yet (no ${column} values)` : `${pct(metric)} of ${column} values are outside ${bounds("", threshold["min"], threshold["max"])}`,
        threshold: `at most ${pct(threshold["maxViolationRate"] ?? 0)} allowed outside`
      }
    case "freshness":
      return {
        metric: metric === null ? "not measured yet (no rows)" : `the newest ${column} is ${age(metric)} old`,
        threshold: `at most ${age(threshold["maxAgeMs"] ?? 0)} old allowed`
      }
  }
}

/** The write behind a transition, as a sentence. */
export const cause = (value: Cause | null): string =>
  value === null
    ? "no write: it aged out, or the state was found at boot"
    : `${value.op} of row ${value.rowId} in ${value.table} by ${value.subjectId ?? "the system"}${
      value.procedure === null ? "" : ` through ${value.procedure}`
    } at ${iso(value.at)} (trace ${value.traceId})`

/** The sample-ratio-mismatch check as a sentence. */
export const srm = (result: Srm.Result, threshold: number): string => {
  switch (result.status) {
    case "unknown":
      return "No exposed units yet: the split cannot be checked."
    case "ok":
      return `The split matches the weights (χ² = ${result.chi2.toFixed(2)}, p = ${result.pValue?.toPrecision(2)}): no sign of broken assignment.`
    case "mismatch":
      return `Sample ratio mismatch: the arms' exposures differ from the weights far more than chance allows (χ² = ${
        result.chi2.toFixed(2)
      }, p = ${result.pValue?.toExponential(1)}, below ${threshold}). Assignment or exposure logging is broken: do not trust these lifts.`
  }
}

/** A 95 % confidence interval of an arm's lift over the baseline, or why there is none. */
export type Interval =
  | { readonly low: number; readonly high: number; readonly level: 0.95 }
  | { readonly low: null; readonly high: null; readonly level: 0.95; readonly why: string }

const z95 = 1.959963984540054

/**
 * The lift's 95 % interval. Conversion rates: the ratio of two binomial proportions, by the delta
 * method on its logarithm (Katz), so the interval of a lift is never below −100 %. Count, sum and
 * average metrics: none, since the per-unit variance is not tracked by the readout.
 */
export const liftInterval = (readout: Readout, arm: Readout["variants"][number]): Interval | null => {
  if (arm.isBaseline) return null
  const none = (why: string): Interval => ({ low: null, high: null, level: 0.95, why })
  if (readout.metric !== "conversionRate") return none(`no interval: the per-unit variance of a ${readout.metric} metric is not tracked`)
  const base = readout.variants.find((v) => v.isBaseline)
  if (base === undefined || base.metric === null || arm.metric === null) return none("no interval: an arm has no exposed units")
  const p1 = arm.metric
  const p0 = base.metric
  if (p1 === 0 || p0 === 0) return none("no interval: an arm has no conversions yet")
  const se = Math.sqrt((1 - p1) / (arm.exposure * p1) + (1 - p0) / (base.exposure * p0))
  const log = Math.log(p1 / p0)
  return { low: Math.exp(log - z95 * se) - 1, high: Math.exp(log + z95 * se) - 1, level: 0.95 }
}

/** The definition details a readout lacks, for its sentence. */
export const metricWords = (experiment: Experiment): string => {
  const metric = experiment.metric
  switch (metric.kind) {
    case "count":
      return "rows per exposed unit"
    case "sum":
      return `sum of ${metric.column} per exposed unit`
    case "avg":
      return `average ${metric.column}`
    case "conversionRate":
      return `share of exposed units with ${metric.column}${metric.equals === undefined ? "" : ` = ${JSON.stringify(metric.equals)}`}`
  }
}
