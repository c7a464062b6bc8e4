/**
 * Full-size proofs of the bucketing (the tests run them at 20,000 units): 100,000 unit ids over a
 * 30 % rollout and over 3:1 variant weights, and a 10 % → 50 % ramp that never turns a unit off.
 * Tolerance: ±0.5 percentage point for shares (about 3.5 standard deviations at this size).
 */
import * as Definition from "../../src/flags/Definition.js"
import * as Evaluate from "../../src/flags/Evaluate.js"
import * as Subject from "../../src/kernel/Subject.js"
import { table } from "../support.js"

const UNITS = Number(process.env.FLAGS_DISTRIBUTION_UNITS ?? 100_000)
const tolerance = 0.005

export const run = async () => {
  const units = Array.from({ length: UNITS }, (_, i) => Subject.make({ type: "user", id: `unit-${i}`, tenantId: null }))
  const rollout = Definition.resolve("rollout-30", { rollout: 30 })
  const onShare = units.filter((unit) => Evaluate.isOn(rollout, unit, 0)).length / UNITS
  const split = Definition.resolve("split-3-1", { variants: [{ name: "a", value: "a", weight: 3 }, { name: "b", value: "b", weight: 1 }] })
  const aShare = units.filter((unit) => Evaluate.variantFor(split, unit, true)!.name === "a").length / UNITS
  const ramp = Definition.resolve("ramp", { schedule: { ramp: { from: 10, to: 50, startAt: 0, endAt: 1_000 } } })
  let turnedOff = 0
  let previous = units.map((unit) => Evaluate.isOn(ramp, unit, 0))
  const startShare = previous.filter(Boolean).length / UNITS
  for (let now = 10; now <= 1_000; now += 10) {
    const current = units.map((unit) => Evaluate.isOn(ramp, unit, now))
    for (let i = 0; i < UNITS; i++) if (previous[i] && !current[i]) turnedOff++
    previous = current
  }
  const endShare = previous.filter(Boolean).length / UNITS
  const verdict = (ok: boolean) => (ok ? "ok" : "FAILED")
  table(`bucketing over ${UNITS.toLocaleString("en-US")} unit ids (tolerance ±${tolerance * 100} point)`, [
    { check: "30 % rollout: share on", expected: 0.3, measured: onShare.toFixed(4), verdict: verdict(Math.abs(onShare - 0.3) <= tolerance) },
    { check: "variants 3:1: share of a", expected: 0.75, measured: aShare.toFixed(4), verdict: verdict(Math.abs(aShare - 0.75) <= tolerance) },
    { check: "ramp 10 % → 50 %: start share", expected: 0.1, measured: startShare.toFixed(4), verdict: verdict(Math.abs(startShare - 0.1) <= tolerance) },
    { check: "ramp 10 % → 50 %: end share", expected: 0.5, measured: endShare.toFixed(4), verdict: verdict(Math.abs(endShare - 0.5) <= tolerance) },
    { check: "ramp: units turned off (100 steps)", expected: 0, measured: turnedOff, verdict: verdict(turnedOff === 0) }
  ])
  if (Math.abs(onShare - 0.3) > tolerance || Math.abs(aShare - 0.75) > tolerance || turnedOff > 0) process.exitCode = 1
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
