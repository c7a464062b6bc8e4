/**
 * Flags ↔ experiments with both areas: `flagsPlugin` accepts a real `defineExperiment` result in
 * flag mode and refuses the three wrong shapes (refusal 4), and the arms a flag serves, written in
 * the `variantFrom` column, are what the readout counts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { defineFlag, evaluateVariant, FlagDefinitionError, flagsPlugin } from "../../src/flags/index.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Experiment from "../../src/standing/Experiment.js"
import { defineExperiment, variantFrom } from "../../src/standing/index.js"
import { Events } from "./support.js"

const arms = [{ name: "control" }, { name: "treatment" }]
const checkout = defineExperiment({
  name: "checkout",
  on: { table: Events },
  subject: "userId",
  variants: arms,
  metric: { kind: "conversionRate", column: "converted" },
  variantFrom: "arm"
})
const Layout = defineFlag({
  key: "checkout-layout",
  value: Schema.Literal("classic", "one-page"),
  default: "classic",
  variants: [{ name: "control", value: "classic" }, { name: "treatment", value: "one-page" }],
  experiment: "checkout"
})

describe("flags ↔ experiments", () => {
  it("flagsPlugin takes defineExperiment results: flag mode accepted; subject mode, holdout, other arms refused", () => {
    assert.doesNotThrow(() => flagsPlugin({ typedFlags: [Layout], experiments: [checkout] }))
    const refused = (experiment: Experiment.Any, message: RegExp) => {
      assert.throws(() => flagsPlugin({ typedFlags: [Layout], experiments: [experiment] }), FlagDefinitionError)
      assert.throws(() => flagsPlugin({ typedFlags: [Layout], experiments: [experiment] }), message)
    }
    const { variantFrom: _, ...bySubject } = { ...checkout }
    refused(defineExperiment({ ...bySubject, on: { table: Events }, variants: arms }), /subject mode/)
    refused(defineExperiment({ ...checkout, on: { table: Events }, variantFrom: "arm", holdout: 0.1 }), /holdout/)
    refused(defineExperiment({ ...checkout, on: { table: Events }, variantFrom: "arm", variants: [{ name: "control" }, { name: "green" }] }), /differ/)
    assert.throws(() => flagsPlugin({ typedFlags: [Layout], experiments: [] }), /not among/)
  })

  it("the arm a flag served, written in variantFrom, is the arm the readout counts", () => {
    const tally = new Experiment.Tally(checkout)
    const flag = { enabled: true, variants: [{ name: "control", value: "classic" }, { name: "treatment", value: "one-page" }] }
    const served = new Map<string, number>()
    for (let i = 0; i < 2_000; i++) {
      const subject = Subject.make({ type: "user", id: `u${i}`, tenantId: "acme" })
      const arm = evaluateVariant("checkout-layout", flag, subject)?.name ?? null
      if (arm !== null) served.set(arm, (served.get(arm) ?? 0) + 1)
      const row = { id: `${i}`, userId: `u${i}`, value: 1, converted: i % 4 === 0, arm }
      assert.strictEqual(variantFrom(checkout, row), arm)
      tally.apply(null, row, 0)
    }
    const readout = tally.readout()
    assert.deepStrictEqual(readout.variants.map((v) => [v.variant, v.exposure]), [["control", served.get("control")], ["treatment", served.get("treatment")]])
    assert.strictEqual(readout.srm.status, "ok")
  })
})
