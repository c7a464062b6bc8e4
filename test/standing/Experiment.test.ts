import { assert, describe, it } from "@effect/vitest"
import * as Experiment from "../../src/standing/Experiment.js"
import * as Hash from "../../src/standing/Hash.js"
import {
  armOf,
  assignVariant,
  chiSquaredSurvival,
  defineExperiment,
  StandingDefinitionError,
  variantFrom
} from "../../src/standing/index.js"
import * as Srm from "../../src/standing/Srm.js"
import { Events, Orders } from "./support.js"

const close = (actual: number | null, expected: number, message?: string) => {
  assert.isNotNull(actual, message)
  assert.approximately(actual!, expected, 1e-9, message)
}

describe("assignVariant", () => {
  const experiment = defineExperiment({
    name: "checkout",
    on: { table: Events },
    subject: "userId",
    variants: [{ name: "a", weight: 3 }, { name: "b", weight: 1 }],
    holdout: 0.1,
    metric: { kind: "count" }
  })

  it("splits 100,000 units by holdout first, then the rescaled weights, within 0.5 percentage points", () => {
    const counts = new Map<string, number>()
    for (let i = 0; i < 100_000; i++) {
      const arm = assignVariant(experiment, `user-${i}`)
      counts.set(arm, (counts.get(arm) ?? 0) + 1)
    }
    // Expected: holdout 10 %, then 90 % split 3:1 → a 67.5 %, b 22.5 %.
    assert.approximately(counts.get("holdout")! / 100_000, 0.1, 0.005)
    assert.approximately(counts.get("a")! / 100_000, 0.675, 0.005)
    assert.approximately(counts.get("b")! / 100_000, 0.225, 0.005)
    // Among units not held out the arms keep exactly their weights' proportion.
    const inArms = counts.get("a")! + counts.get("b")!
    assert.approximately(counts.get("a")! / inArms, 0.75, 0.005)
  })

  it("is deterministic and salted by the experiment's name", () => {
    const again = defineExperiment({ ...experimentOptions(), name: "checkout" })
    const other = defineExperiment({ ...experimentOptions(), name: "pricing" })
    let differs = 0
    for (let i = 0; i < 1_000; i++) {
      assert.strictEqual(assignVariant(experiment, `u${i}`), assignVariant(again, `u${i}`))
      if (assignVariant(experiment, `u${i}`) !== assignVariant(other, `u${i}`)) differs++
    }
    // Independent salts: about 1 − (0.1² + 0.675² + 0.225²) ≈ 49 % of units land elsewhere.
    assert.isAbove(differs, 400)
    assert.isBelow(differs, 600)
  })

  it("hashes UTF-8 bytes with MurmurHash3 (published vectors)", () => {
    assert.strictEqual(Hash.murmur3(""), 0)
    assert.strictEqual(Hash.murmur3("hello"), 613153351)
    assert.strictEqual(Hash.murmur3("The quick brown fox jumps over the lazy dog"), 0x2e4ff723)
    assert.strictEqual(Hash.murmur3("abc"), 0xb3dd93fa)
  })

  it("refuses bad definitions", () => {
    const base = experimentOptions()
    assert.throws(() => defineExperiment({ ...base, variants: [{ name: "a" }] }), StandingDefinitionError)
    assert.throws(() => defineExperiment({ ...base, variants: [{ name: "a" }, { name: "a" }] }), StandingDefinitionError)
    assert.throws(() => defineExperiment({ ...base, variants: [{ name: "a" }, { name: "holdout" }] }), StandingDefinitionError)
    assert.throws(() => defineExperiment({ ...base, variants: [{ name: "a", weight: 0 }, { name: "b" }] }), StandingDefinitionError)
    assert.throws(() => defineExperiment({ ...base, holdout: 1 }), StandingDefinitionError)
    assert.throws(() => defineExperiment({ ...base, baseline: "z" }), StandingDefinitionError)
    assert.throws(() => defineExperiment({ ...base, metric: { kind: "sum", column: "nope" } }), /not a column of "events"/)
  })
})

const experimentOptions = () => ({
  name: "checkout",
  on: { table: Events },
  subject: "userId" as const,
  variants: [{ name: "a", weight: 3 }, { name: "b", weight: 1 }],
  holdout: 0.1,
  metric: { kind: "count" as const }
})

describe("experiment readout", () => {
  const flagged = (metric: Experiment.Metric) =>
    defineExperiment({
      name: `readout-${metric.kind}`,
      on: { table: Events },
      subject: "userId",
      variants: [{ name: "control" }, { name: "treatment" }],
      metric,
      variantFrom: "arm"
    })
  // u1, u2 in control; u3, u4 in treatment; u5 exposed to treatment by its second row (its first,
  // without an arm, does not count); u6 saw both arms (a crossover, left out).
  const rows = [
    { id: "1", userId: "u1", value: 10, converted: false, arm: "control" },
    { id: "2", userId: "u1", value: 20, converted: true, arm: "control" },
    { id: "3", userId: "u2", value: 0, converted: false, arm: "control" },
    { id: "4", userId: "u3", value: 30, converted: true, arm: "treatment" },
    { id: "5", userId: "u4", value: 5, converted: false, arm: "treatment" },
    { id: "6", userId: "u4", value: 5, converted: false, arm: "treatment" },
    { id: "7", userId: "u5", value: 100, converted: true, arm: null },
    { id: "8", userId: "u5", value: 10, converted: false, arm: "treatment" },
    { id: "9", userId: "u6", value: 7, converted: true, arm: "control" },
    { id: "10", userId: "u6", value: 7, converted: true, arm: "treatment" }
  ]
  const tallied = (metric: Experiment.Metric) => {
    const tally = new Experiment.Tally(flagged(metric))
    rows.forEach((row, i) => tally.apply(null, row, 1_000 + i))
    return tally
  }
  const arms = (readout: Experiment.Readout) => Object.fromEntries(readout.variants.map((arm) => [arm.variant, arm]))

  it("count, sum, avg and conversion per exposed unit, with lift and diff (hand-checked)", () => {
    const count = tallied({ kind: "count" }).readout()
    assert.strictEqual(count.totalExposure, 5)
    assert.strictEqual(count.crossovers, 1)
    assert.strictEqual(count.lastUpdatedAt, 1_009)
    const c = arms(count)
    assert.deepStrictEqual([c["control"]!.exposure, c["treatment"]!.exposure], [2, 3])
    close(c["control"]!.metric, 3 / 2)
    close(c["treatment"]!.metric, 4 / 3)
    close(c["treatment"]!.diff, 4 / 3 - 3 / 2)
    close(c["treatment"]!.lift, -1 / 9)
    assert.isNull(c["control"]!.lift)
    assert.isNull(c["control"]!.diff)
    assert.isTrue(c["control"]!.isBaseline)

    const sum = arms(tallied({ kind: "sum", column: "value" }).readout())
    close(sum["control"]!.metric, 30 / 2)
    close(sum["treatment"]!.metric, 50 / 3)
    close(sum["treatment"]!.lift, 1 / 9)

    const avg = arms(tallied({ kind: "avg", column: "value" }).readout())
    close(avg["control"]!.metric, 10)
    close(avg["treatment"]!.metric, 12.5)
    close(avg["treatment"]!.lift, 0.25)
    close(avg["treatment"]!.diff, 2.5)

    const conversion = arms(tallied({ kind: "conversionRate", column: "converted" }).readout())
    close(conversion["control"]!.metric, 1 / 2)
    close(conversion["treatment"]!.metric, 1 / 3)
    close(conversion["treatment"]!.lift, -1 / 3)
  })

  it("lift is null on a zero baseline (diff is still given); updates and deletes move the tally", () => {
    const tally = tallied({ kind: "conversionRate", column: "converted" })
    // u1's converting row stops converting: control converts nobody.
    tally.apply(rows[1]!, { ...rows[1]!, converted: false }, 2_000)
    const zero = arms(tally.readout())
    close(zero["control"]!.metric, 0)
    assert.isNull(zero["treatment"]!.lift)
    close(zero["treatment"]!.diff, 1 / 3)
    // Deleting u6's treatment row resolves the crossover: u6 joins control, converted.
    tally.apply(rows[9]!, null, 2_001)
    const resolved = tally.readout()
    assert.strictEqual(resolved.crossovers, 0)
    assert.strictEqual(arms(resolved)["control"]!.exposure, 3)
    close(arms(resolved)["control"]!.metric, 1 / 3)
  })

  it("an arm may be named \"crossover\": its units are exposed, not counted as crossovers", () => {
    const experiment = defineExperiment({
      name: "named-crossover",
      on: { table: Events },
      subject: "userId",
      variants: [{ name: "crossover" }, { name: "other" }],
      metric: { kind: "count" },
      variantFrom: "arm"
    })
    const tally = new Experiment.Tally(experiment)
    tally.apply(null, { id: "1", userId: "u1", value: 1, converted: false, arm: "crossover" }, 0)
    tally.apply(null, { id: "2", userId: "u1", value: 1, converted: false, arm: "crossover" }, 0)
    tally.apply(null, { id: "3", userId: "u2", value: 1, converted: false, arm: "other" }, 0)
    const readout = tally.readout()
    assert.strictEqual(readout.crossovers, 0)
    assert.deepStrictEqual(readout.variants.map((arm) => [arm.variant, arm.exposure, arm.rows]), [["crossover", 1, 2], ["other", 1, 1]])
  })

  it("a unit's arm follows its rows through crossover and back, by update and delete", () => {
    const tally = new Experiment.Tally(flagged({ kind: "sum", column: "value" }))
    const a1 = { id: "1", userId: "u", value: 1, converted: false, arm: "control" }
    const a2 = { id: "2", userId: "u", value: 2, converted: false, arm: "control" }
    tally.apply(null, a1, 0)
    tally.apply(null, a2, 0)
    const moved = { ...a2, arm: "treatment" }
    tally.apply(a2, moved, 0)
    assert.strictEqual(tally.readout().crossovers, 1)
    assert.strictEqual(tally.readout().totalExposure, 0)
    // Its control row goes: the unit is in treatment alone, with the one row left.
    tally.apply(a1, null, 0)
    const readout = tally.readout()
    assert.strictEqual(readout.crossovers, 0)
    assert.deepStrictEqual(readout.variants.map((arm) => [arm.variant, arm.exposure, arm.rows, arm.metric]), [["control", 0, 0, null], ["treatment", 1, 1, 2]])
    tally.apply(moved, null, 0)
    assert.strictEqual(tally.readout().totalExposure, 0)
  })

  it("conversionRate with `equals` converts on strict equality only", () => {
    const experiment = defineExperiment({
      name: "eq",
      on: { table: Orders },
      subject: "tenantId",
      variants: [{ name: "x" }, { name: "y" }],
      metric: { kind: "conversionRate", column: "status", equals: "paid" }
    })
    const tally = new Experiment.Tally(experiment)
    let paid = 0
    let units = 0
    for (let i = 0; i < 200; i++) {
      const status = i % 3 === 0 ? "paid" : "open"
      tally.apply(null, { id: `o${i}`, tenantId: `t${i}`, amount: 1, status, placedAt: 0 }, 0)
      units++
      if (status === "paid") paid++
    }
    const readout = tally.readout()
    const converted = readout.variants.reduce((sum, arm) => sum + (arm.metric ?? 0) * arm.exposure, 0)
    assert.strictEqual(readout.totalExposure, units)
    assert.approximately(converted, paid, 1e-9)
  })
})

describe("sample-ratio mismatch", () => {
  it("the χ² tail matches published critical values", () => {
    assert.approximately(chiSquaredSurvival(10.828, 1), 0.001, 1e-6)
    assert.approximately(chiSquaredSurvival(13.816, 2), 0.001, 1e-6)
    assert.approximately(chiSquaredSurvival(16.266, 3), 0.001, 1e-6)
    assert.approximately(chiSquaredSurvival(3.841459, 1), 0.05, 1e-6)
    assert.approximately(chiSquaredSurvival(2, 2), Math.exp(-1), 1e-12)
    assert.strictEqual(chiSquaredSurvival(0, 3), 1)
  })

  it("is raised for a skewed exposure log and not for a fair one", () => {
    const experiment = defineExperiment({
      name: "srm",
      on: { table: Events },
      subject: "userId",
      variants: [{ name: "control" }, { name: "treatment" }],
      metric: { kind: "count" },
      variantFrom: "arm"
    })
    const fair = new Experiment.Tally(experiment)
    const skewed = new Experiment.Tally(experiment)
    for (let i = 0; i < 10_000; i++) {
      // Fair: the arms a 50/50 hash gives; skewed: one treatment exposure in ten lost.
      const arm = assignVariant({ ...experiment, salt: "fair", holdout: 0 }, `u${i}`)
      fair.apply(null, { id: `f${i}`, userId: `u${i}`, value: 1, converted: false, arm }, 0)
      if (arm === "treatment" && i % 10 === 0) continue
      skewed.apply(null, { id: `s${i}`, userId: `u${i}`, value: 1, converted: false, arm }, 0)
    }
    const ok = fair.readout().srm
    assert.strictEqual(ok.status, "ok")
    assert.isAbove(ok.pValue!, Srm.threshold)
    const bad = skewed.readout().srm
    assert.strictEqual(bad.status, "mismatch")
    assert.isBelow(bad.pValue!, Srm.threshold)
    assert.strictEqual(bad.degreesOfFreedom, 1)
    assert.strictEqual(new Experiment.Tally(experiment).readout().srm.status, "unknown")
  })

  it("includes the holdout as an arm with its expected share", () => {
    const experiment = defineExperiment({ ...experimentOptions(), name: "with-holdout" })
    const tally = new Experiment.Tally(experiment)
    for (let i = 0; i < 20_000; i++) tally.apply(null, { id: `${i}`, userId: `u${i}`, value: 1, converted: false, arm: null }, 0)
    const readout = tally.readout()
    assert.deepStrictEqual(readout.variants.map((arm) => [arm.variant, arm.isHoldout, arm.expectedShare]), [
      ["holdout", true, 0.1],
      ["a", false, 0.675],
      ["b", false, 0.225]
    ])
    assert.strictEqual(readout.srm.degreesOfFreedom, 2)
    assert.strictEqual(readout.srm.status, "ok")
  })
})

describe("flags ↔ experiments", () => {
  const linked = defineExperiment({
    name: "linked",
    on: { table: Events },
    subject: "userId",
    variants: [{ name: "control" }, { name: "treatment" }],
    metric: { kind: "count" },
    variantFrom: "arm"
  })

  it("variantFrom reads the arm a flag served; unknown or missing arms are none", () => {
    assert.strictEqual(variantFrom(linked, { arm: "treatment" }), "treatment")
    assert.isNull(variantFrom(linked, { arm: "other" }))
    assert.isNull(variantFrom(linked, { arm: null }))
    assert.strictEqual(armOf(linked, { arm: "control" }, "u1"), "control")
    const bySubject = defineExperiment({ ...experimentOptions(), name: "by-subject", holdout: 0 })
    assert.strictEqual(armOf(bySubject, {}, "u1"), assignVariant(bySubject, "u1"))
  })
})
