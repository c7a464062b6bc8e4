/**
 * Refusal 4 of spec 7.1 holds for overrides too: a flag that feeds an experiment serves exactly the
 * experiment's arms, so an override whose variants rename, add or drop an arm is refused whole (the
 * experiment would drop every row carrying an arm it does not have, silently). Weights and the
 * rollout may change: the flag decides exposure.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Schema } from "effect"
import { defineFlag, flagsPlugin } from "../../src/flags/index.js"

const Color = defineFlag({
  key: "color",
  value: Schema.Literal("blue", "green"),
  default: "blue",
  variants: [{ name: "control", value: "blue" }, { name: "treatment", value: "green" }],
  experiment: "button-color"
})
const experiment = { name: "button-color", variants: [{ name: "control" }, { name: "treatment" }], variantFrom: "arm" }

describe("flag overrides of a flag that feeds an experiment", () => {
  it.effect("variants whose names differ from the experiment's arms are refused; new weights and rollout pass", () =>
    Effect.gen(function*() {
      const { registry } = flagsPlugin({ typedFlags: [Color], experiments: [experiment] })
      for (const variants of [
        [{ name: "control", value: "blue" }, { name: "green-arm", value: "green" }],
        [{ name: "control", value: "blue" }],
        [{ name: "control", value: "blue" }, { name: "treatment", value: "green" }, { name: "extra", value: "green" }]
      ]) {
        const exit = yield* Effect.exit(registry.override("color", { variants }, { type: "user", id: "ops" }))
        assert.isTrue(Exit.isFailure(exit), JSON.stringify(variants))
        if (Exit.isFailure(exit) && exit.cause._tag === "Fail") {
          assert.strictEqual(exit.cause.error._tag, "OverrideRefused")
          assert.match(String((exit.cause.error as { readonly reason?: string }).reason), /experiment "button-color" arms \[control, treatment\]/)
        }
        assert.deepStrictEqual(registry.resolved("color")!.variants.map((variant) => variant.name), ["control", "treatment"])
      }
      const accepted = yield* registry.override("color", { rollout: 50, variants: [{ name: "treatment", value: "green", weight: 3 }, { name: "control", value: "blue" }] }, { type: "user", id: "ops" })
      assert.strictEqual(accepted.version, 1)
      assert.deepStrictEqual(registry.resolved("color")!.variants.map((variant) => [variant.name, variant.weight]), [["treatment", 3], ["control", 1]])
    }))
})
