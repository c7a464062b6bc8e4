import { assert, describe, it } from "@effect/vitest"
import { Effect, Ref } from "effect"
import * as Store from "../../src/kernel/store/Store.js"
import {
  defineExperiment,
  ExperimentRegistry,
  type ExperimentUpdate,
  standingPlugin,
  useExperiment
} from "../../src/standing/index.js"
import { Events, sqliteFile, stack, tiers } from "./support.js"

const checkout = defineExperiment({
  name: "checkout",
  on: { table: Events },
  subject: "userId",
  variants: [{ name: "control" }, { name: "treatment" }],
  metric: { kind: "conversionRate", column: "converted" },
  variantFrom: "arm"
})
const plugin = standingPlugin({ experiments: [checkout] })

const event = (id: string, userId: string, arm: string | null, converted: boolean) => ({ id, userId, value: 1, converted, arm })

describe("experiment registry", () => {
  it.effect("useExperiment answers null outside a served app", () => Effect.map(useExperiment(checkout), (readout) => assert.isNull(readout)))

  for (const tier of tiers) {
    it.scoped(`${tier.name}: live readout and updates to subscribers`, () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const registry = yield* ExperimentRegistry
        const updates = yield* Ref.make<ReadonlyArray<ExperimentUpdate>>([])
        yield* registry.subscribe((update) => Ref.update(updates, (all) => [...all, update]))
        yield* store.insert(Events, event("1", "u1", "control", false))
        yield* store.insert(Events, event("2", "u2", "treatment", true))
        yield* store.update(Events, "1", { converted: true })
        const readout = yield* registry.get("checkout")
        assert.deepStrictEqual(readout?.variants.map((arm) => [arm.variant, arm.exposure, arm.metric]), [["control", 1, 1], ["treatment", 1, 1]])
        assert.strictEqual((yield* Ref.get(updates)).length, 3)
        assert.strictEqual((yield* registry.snapshot()).length, 1)
        assert.isNull(yield* registry.get("nope"))
      }).pipe(Effect.provide(stack(tier.client(), plugin))))
  }

  it.scoped("a restart rebuilds the readout from the table", () => {
    const file = sqliteFile()
    return Effect.gen(function*() {
      yield* Effect.gen(function*() {
        const store = yield* Store.Store
        for (let i = 0; i < 10; i++) yield* store.insert(Events, event(`${i}`, `u${i}`, i % 2 === 0 ? "control" : "treatment", i % 3 === 0))
      }).pipe(Effect.provide(stack(file, plugin)), Effect.scoped)
      const readout = yield* Effect.flatMap(ExperimentRegistry, (registry) => registry.get("checkout")).pipe(Effect.provide(stack(file, plugin)), Effect.scoped)
      // Even ids are control, odd treatment; converted are u0, u6 (control) and u3, u9 (treatment).
      assert.deepStrictEqual(readout?.variants.map((arm) => [arm.exposure, arm.metric]), [[5, 2 / 5], [5, 2 / 5]])
    })
  })
})
