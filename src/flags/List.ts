/**
 * One row of the inspect list: a flag's shape, its rollout now (a ramp's interpolated percentage),
 * its override and version, and its lifecycle report (spec 2.11).
 */
import * as Definition from "./Definition.js"
import type { Entry } from "./Entry.js"
import * as Evaluate from "./Evaluate.js"
import * as Lifecycle from "./Lifecycle.js"
import type * as Usage from "./Usage.js"

const dayMs = 86_400_000

/** One row of the inspect list. */
export interface ListEntry {
  readonly key: string
  readonly kind: "boolean" | "object" | "typed"
  readonly description: string | null
  readonly enabled: boolean
  readonly rollout: number
  readonly rolloutBy: "tenant" | "subject"
  readonly targetingRules: number
  readonly variants: ReadonlyArray<{ readonly name: string; readonly weight: number }>
  readonly offVariant: string | null
  readonly schedule: { readonly activateAt: number | null; readonly deactivateAt: number | null; readonly ramp: Definition.Resolved["ramp"] | null }
  readonly override: Readonly<Record<string, unknown>> | null
  readonly version: number
  readonly lifecycle: Lifecycle.Report
}

/** The row of `entry` at `now`; `newest` is its newest server-side read (buffered or recorded), if any. */
export const listEntry = (entry: Entry, now: number, usage: Usage.Options, newest: number | undefined): ListEntry => {
  const r = entry.resolved
  return {
    key: entry.key,
    kind: entry.typed !== undefined ? "typed" : r.boolean ? "boolean" : "object",
    description: r.description ?? null,
    enabled: r.enabled,
    rollout: Evaluate.percentageAt(r, now),
    rolloutBy: r.rolloutBy,
    targetingRules: r.targeting.length,
    variants: r.variants.map((variant) => ({ name: variant.name, weight: variant.weight })),
    offVariant: r.offVariant ?? null,
    schedule: { activateAt: r.activateAt ?? null, deactivateAt: r.deactivateAt ?? null, ramp: r.ramp ?? null },
    override: entry.override ?? null,
    version: entry.version,
    lifecycle: Lifecycle.report(r, usage.track, newest, now, usage.staleAfterDays * dayMs)
  }
}
