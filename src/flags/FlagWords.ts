/**
 * A flag's rule and lifecycle in words, for the dashboard: what the evaluator does, step by step in
 * its order (enabled, schedule, targeting, rollout, variants), and what the lifecycle labels mean
 * for this flag ("removal candidate: always on…"), so an operator needs neither the spec nor JSON.
 */
import type * as Definition from "./Definition.js"
import type { ListEntry } from "./List.js"
import type * as Usage from "./Usage.js"

/** One flag in words: the rule's steps, and each lifecycle label with what it means here. */
export interface Words {
  /** The evaluation steps, in order, each a sentence. */
  readonly rule: ReadonlyArray<string>
  readonly shape: { readonly label: string; readonly meaning: string }
  readonly usage: { readonly label: string; readonly meaning: string }
  /** Why the flag is a removal candidate and what to do; null when it is not one. */
  readonly removal: string | null
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.000Z$/, "Z")
const percent = (n: number) => `${Number.isInteger(n) ? n : Number(n.toFixed(2))}%`

const andList = (items: ReadonlyArray<string>, word = "and"): string =>
  items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} ${word} ${items[items.length - 1]}`

/** A targeting rule in words: its keys ANDed. */
export const ruleWords = (rule: Definition.Rule): string => {
  const parts: Array<string> = []
  const list = (values: ReadonlyArray<string> | undefined, what: string, key: string) => {
    if (values === undefined) return
    parts.push(values.length === 0 ? `no one (${key} is an empty list)` : `${what} ${andList(values, "or")}`)
  }
  list(rule.subjectIds, "subject id", "subjectIds")
  list(rule.tenantIds, "tenant", "tenantIds")
  list(rule.subjectTypes, "subject type", "subjectTypes")
  // Values are shown as JSON: "50" and 50 are different values to the rule (strict comparison).
  for (const [name, value] of Object.entries(rule.metadata ?? {})) parts.push(`metadata ${name} = ${JSON.stringify(value)}`)
  return parts.length === 0 ? "everyone" : andList(parts)
}

const shapeMeaning = (entry: ListEntry): string => {
  const schedule = entry.schedule
  switch (entry.lifecycle.shape) {
    case "constantOn":
      return "always on: enabled, a full rollout, and no targeting, variants or schedule left that could change the answer"
    case "constantOff":
      return entry.enabled ? "always off: its rollout is 0%" : "always off: it is disabled"
    case "expired":
      return `expired: off for everyone since ${schedule.deactivateAt === null ? "its deactivation" : iso(schedule.deactivateAt)}`
    case "notYetActive":
      return `not active yet: off for everyone until ${schedule.activateAt === null ? "its activation" : iso(schedule.activateAt)}`
    case "conditional":
      return "conditional: the answer depends on who asks, or when"
  }
}

const usageMeaning = (entry: ListEntry, usage: Usage.Options): string => {
  const last = entry.lifecycle.lastEvaluatedAt
  switch (entry.lifecycle.usage) {
    case "evaluated":
      return `in use: read by server code within the last ${usage.staleAfterDays} days${last === null ? "" : ` (last ${iso(last)})`}`
    case "stale":
      return `stale: not read by server code for more than ${usage.staleAfterDays} days${last === null ? "" : ` (last ${iso(last)})`}: probably nothing reads it any more`
    case "neverObserved":
      return "never observed: no server-side read recorded yet (whole flag sets sent to clients are not counted as use)"
    case "untracked":
      return "not tracked: usage tracking is off (flagsPlugin usage.track), so whether code still reads the flag is unknown"
  }
}

const shapeLabels: Readonly<Record<ListEntry["lifecycle"]["shape"], string>> = {
  constantOn: "always on",
  constantOff: "always off",
  expired: "expired",
  notYetActive: "not active yet",
  conditional: "conditional"
}
const usageLabels: Readonly<Record<ListEntry["lifecycle"]["usage"], string>> = {
  evaluated: "in use",
  stale: "stale",
  neverObserved: "never observed",
  untracked: "not tracked"
}

/** The evaluation steps of `entry`, in the evaluator's order. */
export const steps = (entry: ListEntry, targeting: ReadonlyArray<Definition.Rule>, now: number): ReadonlyArray<string> => {
  const out: Array<string> = []
  const overridden = entry.override === null ? "" : " (an override is in force)"
  if (!entry.enabled) {
    out.push(`Disabled: off for everyone${overridden}.`)
    if (entry.offVariant !== null) out.push(`Serves the variant ${entry.offVariant} while off.`)
    return out
  }
  out.push(`Enabled${overridden}.`)
  const { activateAt, deactivateAt, ramp } = entry.schedule
  if (activateAt !== null && deactivateAt !== null) out.push(`Live from ${iso(activateAt)} until ${iso(deactivateAt)}; off outside that window.`)
  else if (activateAt !== null) out.push(`Live from ${iso(activateAt)}; off before.`)
  else if (deactivateAt !== null) out.push(`Live until ${iso(deactivateAt)}; off from then on.`)
  if (targeting.length === 0) out.push("Targets everyone.")
  else if (targeting.length === 1) out.push(`Targets ${ruleWords(targeting[0]!)}; everyone else is off.`)
  else out.push(`Targets callers matching any of: ${targeting.map((rule, i) => `(${i + 1}) ${ruleWords(rule)}`).join("; ")}; everyone else is off.`)
  const unit = entry.rolloutBy === "tenant" ? "tenants" : "subjects"
  if (ramp !== null && ramp !== undefined) {
    out.push(
      `Rollout ramps from ${percent(ramp.from)} at ${iso(ramp.startAt)} to ${percent(ramp.to)} at ${iso(ramp.endAt)}, by ${
        entry.rolloutBy === "tenant" ? "tenant" : "subject"
      }: ${percent(entry.rollout)} of targeted ${unit} now${now >= ramp.endAt ? " (the ramp is over)" : ""}.`
    )
  } else if (entry.rollout >= 100) {
    out.push(targeting.length === 0 ? "On for everyone." : "On for every targeted caller.")
  } else {
    out.push(
      `On for ${percent(entry.rollout)} of targeted ${unit}, chosen by a stable hash of the ${
        entry.rolloutBy === "tenant" ? "tenant id" : "subject id"
      } (a caller without one is off).`
    )
  }
  if (entry.variants.length > 0) {
    const total = entry.variants.reduce((sum, v) => sum + v.weight, 0)
    out.push(`Variants: ${andList(entry.variants.map((v) => `${v.name} ${percent(total === 0 ? 0 : 100 * v.weight / total)} (weight ${v.weight})`))}.`)
    if (entry.offVariant !== null) out.push(`Callers it is off for get the variant ${entry.offVariant}.`)
  }
  return out
}

/** `entry` in words at `now`. */
export const describe = (entry: ListEntry, targeting: ReadonlyArray<Definition.Rule>, usage: Usage.Options, now: number): Words => {
  const { shape, usage: state, removalCandidate } = entry.lifecycle
  const shapeWhy = shape === "constantOn" || shape === "constantOff" || shape === "expired"
  return {
    rule: steps(entry, targeting, now),
    shape: { label: shapeLabels[shape], meaning: shapeMeaning(entry) },
    usage: { label: usageLabels[state], meaning: usageMeaning(entry, usage) },
    removal: !removalCandidate
      ? null
      : shapeWhy
      ? `A removal candidate: the flag no longer decides anything (${shapeMeaning(entry)}). Delete its definition and keep only the code path it ${
        shape === "constantOn" ? "turns on" : "leaves on (the one for off)"
      }.`
      : `A removal candidate: ${usageMeaning(entry, usage).replace(/^stale: /, "")}. Check that no client reads it, then delete it and the code it guards.`
  }
}
