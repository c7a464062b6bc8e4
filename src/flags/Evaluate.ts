/**
 * Flag evaluation (spec 3.8), a plain synchronous function: the first failing step ends as off —
 * `enabled: false`, then the schedule, then targeting, then the percentage rollout (a ramp's
 * interpolated percentage replaces the static rollout). A variant flag then draws its variant with
 * the variant seed; off serves `offVariant`, else no variant.
 */
import type { Subject } from "../kernel/Subject.js"
import * as Bucket from "./Bucket.js"
import type { Resolved, Rule } from "./Definition.js"

/** Which step decided. */
export type Reason = "disabled" | "notYetActive" | "expired" | "notTargeted" | "noUnit" | "outOfRollout" | "on"

/** A served variant: `{name, value, enabled}` (spec 2.11). A boolean flag yields `on` or `off`. */
export interface VariantResolution {
  readonly name: string
  readonly value: unknown
  readonly enabled: boolean
}

const hasOwn = Object.prototype.hasOwnProperty

/** True when `rule` matches: every key it names holds (a key with an empty list matches no one). */
export const ruleMatches = (rule: Rule, subject: Subject): boolean => {
  if (rule.subjectIds !== undefined && !rule.subjectIds.includes(subject.id)) return false
  if (rule.tenantIds !== undefined && (subject.tenantId === null || !rule.tenantIds.includes(subject.tenantId))) return false
  if (rule.subjectTypes !== undefined && !rule.subjectTypes.includes(subject.type)) return false
  if (rule.metadata !== undefined) {
    const metadata = subject.metadata
    for (const name in rule.metadata) {
      if (!hasOwn.call(metadata, name) || metadata[name] !== rule.metadata[name]) return false
    }
  }
  return true
}

/** The rollout percentage at `now`: the ramp's interpolation while one is declared, else the static rollout. */
export const percentageAt = (flag: Resolved, now: number): number => {
  const ramp = flag.ramp
  if (ramp === undefined) return flag.rollout
  if (now <= ramp.startAt) return ramp.from
  if (now >= ramp.endAt) return ramp.to
  return ramp.from + (ramp.to - ramp.from) * (now - ramp.startAt) / (ramp.endAt - ramp.startAt)
}

/** The rollout unit: the subject id, or the tenant id under `rolloutBy: 'tenant'`; none for anonymous callers. */
export const unitOf = (flag: Resolved, subject: Subject): string | null =>
  flag.rolloutBy === "tenant" ? subject.tenantId : subject.type === "anonymous" ? null : subject.id

/** Runs the steps of 3.8 and says which one decided (`on` when every step passed). */
export const decide = (flag: Resolved, subject: Subject, now: number): Reason => {
  if (!flag.enabled) return "disabled"
  if (flag.activateAt !== undefined && now < flag.activateAt) return "notYetActive"
  if (flag.deactivateAt !== undefined && now >= flag.deactivateAt) return "expired"
  const rules = flag.matchers
  if (rules.length > 0) {
    let hit = false
    for (let i = 0; i < rules.length; i++) {
      if (rules[i]!(subject)) {
        hit = true
        break
      }
    }
    if (!hit) return "notTargeted"
  }
  const admitted = Bucket.threshold(percentageAt(flag, now))
  if (admitted >= Bucket.buckets) return "on"
  const unit = unitOf(flag, subject)
  if (unit === null) return "noUnit"
  return Bucket.bucketOf(flag.key, unit, Bucket.rolloutSeed) < admitted ? "on" : "outOfRollout"
}

/** The variant a unit draws (the flag being on): cumulative weights walked in declaration order. */
export const drawVariant = (flag: Resolved, unit: string | null) =>
  unit === null ? firstWeighted(flag) : variantAt(flag, Bucket.bucketOf(flag.key, unit, Bucket.variantSeed))

/** The variant of a caller without a unit: the first with a positive weight, so the answer is still deterministic. */
export const firstWeighted = (flag: Resolved) => flag.variants.find((variant) => variant.weight > 0)!

/** The variant of variant bucket `bucket`: cumulative weights walked in declaration order. */
export const variantAt = (flag: Resolved, bucket: number) => {
  const variants = flag.variants
  const point = (bucket + 0.5) / Bucket.buckets * flag.totalWeight
  let cumulative = 0
  for (const variant of variants) {
    cumulative += variant.weight
    if (variant.weight > 0 && point < cumulative) return variant
  }
  for (let i = variants.length - 1; i >= 0; i--) if (variants[i]!.weight > 0) return variants[i]!
  return variants[0]!
}

/** The served variant, or null (a variant flag that is off and has no `offVariant`). */
export const variantFor = (flag: Resolved, subject: Subject, on: boolean): VariantResolution | null => {
  if (flag.variants.length === 0) return { name: on ? "on" : "off", value: on, enabled: on }
  if (!on) {
    if (flag.offVariant === undefined) return null
    const off = flag.variants.find((variant) => variant.name === flag.offVariant)!
    return { name: off.name, value: off.value, enabled: false }
  }
  const drawn = drawVariant(flag, unitOf(flag, subject))
  return { name: drawn.name, value: drawn.value, enabled: drawn.name !== flag.offVariant }
}

/** True when the flag is on for `subject` at `now`; a flag serving its `offVariant` is off. */
export const isOn = (flag: Resolved, subject: Subject, now: number): boolean => {
  if (decide(flag, subject, now) !== "on") return false
  if (flag.offVariant === undefined) return true
  return drawVariant(flag, unitOf(flag, subject)).name !== flag.offVariant
}
