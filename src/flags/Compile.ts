/**
 * A flag compiled for the hot path: the steps of spec 3.8 as one synchronous function, with every
 * part that does not depend on the caller or the time worked out once, when the flag is resolved
 * (at construction, and again whenever an override changes it). The targeting rules are ORed
 * without a loop for the usual few, a static rollout is a precomputed bucket threshold, and the
 * bucket hash mixes the `flagKey:` prefix once (see `Bucket.bucketer`). It answers exactly as
 * `Evaluate.isOn`, which stays the step-by-step reference (and says which step decided).
 */
import type { Subject } from "../kernel/Subject.js"
import * as Bucket from "./Bucket.js"
import type { Matcher, Resolved } from "./Definition.js"
import { matchesEveryone, matchesNoOne } from "./Definition.js"
import * as Evaluate from "./Evaluate.js"

/** Whether a flag is on for `subject` at `now` (epoch ms; ignored by a flag that is not timed). */
export type Evaluator = (subject: Subject, now: number) => boolean

const alwaysOff: Evaluator = () => false

/**
 * The OR of a flag's compiled rules: undefined when targeting restricts no one (no rules, or a
 * rule `{}`), `matchesNoOne` when every rule names an empty list.
 */
export const targetingOf = (matchers: ReadonlyArray<Matcher>): Matcher | undefined => {
  if (matchers.length === 0 || matchers.includes(matchesEveryone)) return undefined
  const live = matchers.filter((matcher) => matcher !== matchesNoOne)
  switch (live.length) {
    case 0:
      return matchesNoOne
    case 1:
      return live[0]!
    case 2: {
      const [a, b] = live as [Matcher, Matcher]
      return (subject) => a(subject) || b(subject)
    }
    case 3: {
      const [a, b, c] = live as [Matcher, Matcher, Matcher]
      return (subject) => a(subject) || b(subject) || c(subject)
    }
    default:
      return (subject) => {
        for (let i = 0; i < live.length; i++) if (live[i]!(subject)) return true
        return false
      }
  }
}

/** Compiles `flag` (see the module comment). */
export const compile = (flag: Resolved): Evaluator => {
  if (!flag.enabled) return alwaysOff
  const targeting = targetingOf(flag.matchers)
  if (targeting === matchesNoOne) return alwaysOff
  const ramp = flag.ramp
  const fixed = Bucket.threshold(flag.rollout)
  // A static rollout admitting no bucket is off for everyone (a unit or not).
  if (ramp === undefined && fixed <= 0) return alwaysOff
  const activateAt = flag.activateAt ?? -Infinity
  const deactivateAt = flag.deactivateAt ?? Infinity
  const byTenant = flag.rolloutBy === "tenant"
  const rolloutBucket = Bucket.bucketer(flag.key, Bucket.rolloutSeed)
  const offVariant = flag.offVariant
  const variantBucket = offVariant === undefined ? undefined : Bucket.bucketer(flag.key, Bucket.variantSeed)
  // A caller without a unit draws the first weighted variant: decided here once.
  const unitlessOn = offVariant === undefined || Evaluate.firstWeighted(flag).name !== offVariant
  return (subject, now) => {
    if (now < activateAt || now >= deactivateAt) return false
    if (targeting !== undefined && !targeting(subject)) return false
    const admitted = ramp === undefined ? fixed : Bucket.threshold(Evaluate.percentageAt(flag, now))
    const unit = byTenant ? subject.tenantId : subject.type === "anonymous" ? null : subject.id
    if (admitted < Bucket.buckets && (unit === null || rolloutBucket(unit) >= admitted)) return false
    if (variantBucket === undefined) return true
    return unit === null ? unitlessOn : Evaluate.variantAt(flag, variantBucket(unit)).name !== offVariant
  }
}
