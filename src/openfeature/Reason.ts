/**
 * The OpenFeature `reason` of an fw evaluation: which step of spec 3.8 decided, as one of
 * OpenFeature's standard reasons (the fw step itself travels in `flagMetadata.fwStep`).
 *
 * | fw step | reason |
 * |---|---|
 * | `disabled` (`enabled: false`, a toggle) | `DISABLED` |
 * | `notYetActive`, `expired` (the schedule) | `DISABLED` |
 * | `notTargeted` (no rule matched) | `DEFAULT` |
 * | `noUnit` (no rollout unit below 100 %) | `DEFAULT` |
 * | `outOfRollout` (the bucket is past the rollout) | `SPLIT` |
 * | `on`, a targeting rule restricted and matched | `TARGETING_MATCH` |
 * | `on`, a partial rollout or a weighted draw among variants decided | `SPLIT` |
 * | `on`, nothing restricts and nothing is timed | `STATIC` |
 * | `on`, only a schedule window applies | `DEFAULT` |
 */
import type { Resolved } from "../flags/Definition.js"
import * as Compile from "../flags/Compile.js"
import * as Evaluate from "../flags/Evaluate.js"

/** OpenFeature's standard reasons this mapping uses (the SDKs' `StandardResolutionReasons`). */
export type Standard = "STATIC" | "DEFAULT" | "TARGETING_MATCH" | "SPLIT" | "DISABLED"

/** What of a flag decides an `on` reason; worked out once per resolved flag (an override makes a new one). */
interface Shape {
  readonly restricts: boolean
  readonly splitsVariants: boolean
}

const shapes = new WeakMap<Resolved, Shape>()

const shapeOf = (flag: Resolved): Shape => {
  let shape = shapes.get(flag)
  if (shape === undefined) {
    let weighted = 0
    for (const variant of flag.variants) if (variant.weight > 0) weighted++
    shape = { restricts: Compile.targetingOf(flag.matchers) !== undefined, splitsVariants: weighted > 1 }
    shapes.set(flag, shape)
  }
  return shape
}

/** The reason of step `step` for `flag` at `now` (see the module comment). */
export const of = (flag: Resolved, step: Evaluate.Reason, now: number): Standard => {
  switch (step) {
    case "disabled":
    case "notYetActive":
    case "expired":
      return "DISABLED"
    case "notTargeted":
    case "noUnit":
      return "DEFAULT"
    case "outOfRollout":
      return "SPLIT"
    case "on": {
      const shape = shapeOf(flag)
      if (shape.restricts) return "TARGETING_MATCH"
      if (shape.splitsVariants || Evaluate.percentageAt(flag, now) < 100) return "SPLIT"
      return flag.timed ? "DEFAULT" : "STATIC"
    }
  }
}
