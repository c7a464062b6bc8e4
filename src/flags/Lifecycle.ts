/**
 * The lifecycle report of spec 2.11: a shape read from the definition alone, a usage state read
 * from observed server-side evaluations, and `removalCandidate` set only by a proof.
 */
import type { Resolved } from "./Definition.js"

/** What the definition alone says. */
export type Shape = "constantOn" | "constantOff" | "expired" | "notYetActive" | "conditional"

/** What observed reads say. `stale` is the only usage proof. */
export type UsageState = "evaluated" | "stale" | "neverObserved" | "untracked"

/** One flag's report. */
export interface Report {
  readonly shape: Shape
  readonly usage: UsageState
  readonly lastEvaluatedAt: number | null
  readonly removalCandidate: boolean
}

/** The shape of a flag at `now`. */
export const shapeOf = (flag: Resolved, now: number): Shape => {
  const ramp = flag.ramp
  const rolloutNow = ramp === undefined ? flag.rollout : undefined
  if (!flag.enabled || (rolloutNow === 0) || (ramp !== undefined && ramp.from === 0 && ramp.to === 0)) return "constantOff"
  if (flag.deactivateAt !== undefined && now >= flag.deactivateAt) return "expired"
  if (flag.activateAt !== undefined && now < flag.activateAt) return "notYetActive"
  // A schedule is live while it can still change the answer: a future deactivation, or an unfinished ramp.
  const liveSchedule = flag.deactivateAt !== undefined || (ramp !== undefined && (now < ramp.endAt || ramp.to < 100))
  const fullRollout = ramp === undefined ? flag.rollout >= 100 : ramp.to >= 100 && now >= ramp.endAt
  if (fullRollout && flag.targeting.length === 0 && flag.variants.length === 0 && !liveSchedule) return "constantOn"
  return "conditional"
}

/**
 * The usage state: `evaluated` when the newest read is inside the threshold, `stale` when reads
 * exist in the window but the newest is older than it, `neverObserved` without any read.
 */
export const usageOf = (tracked: boolean, newest: number | undefined, now: number, staleAfterMs: number): UsageState => {
  if (!tracked) return "untracked"
  if (newest === undefined) return "neverObserved"
  return newest >= now - staleAfterMs ? "evaluated" : "stale"
}

/** A flag's report. */
export const report = (flag: Resolved, tracked: boolean, newest: number | undefined, now: number, staleAfterMs: number): Report => {
  const shape = shapeOf(flag, now)
  const usage = usageOf(tracked, newest, now, staleAfterMs)
  return {
    shape,
    usage,
    lastEvaluatedAt: newest ?? null,
    removalCandidate: shape === "constantOn" || shape === "constantOff" || shape === "expired" || usage === "stale"
  }
}
