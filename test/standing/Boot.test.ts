/**
 * The boot scan and the change listener: a write committed while the tables are being read at
 * boot is counted once, whether the scan read it (its change is skipped) or not (its change is
 * replayed), on every tier.
 */
import { FetchHttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as PluginHost from "../../src/server/PluginHost.js"
import { compareIds } from "../../src/standing/Engine.js"
import { defineExpectation, defineExperiment, ExpectationRegistry, ExperimentRegistry, standingPlugin } from "../../src/standing/index.js"
import { Events, Orders, tables, tiers } from "./support.js"

const volume = defineExpectation({ name: "volume", on: { table: Orders }, invariant: { kind: "rowCount", max: 1_000_000 } })
const nulls = defineExpectation({ name: "nulls", on: { table: Orders }, invariant: { kind: "nullRate", column: "amount", maxRate: 0.9 } })
const trial = defineExperiment({
  name: "trial",
  on: { table: Events },
  subject: "userId",
  variants: [{ name: "control", weight: 1 }, { name: "treatment", weight: 1 }],
  metric: { kind: "count" },
  baseline: "control"
})

const order = (id: string, amount: number | null) => ({ id, tenantId: "acme", amount, status: "open", placedAt: 0 })

/**
 * The store the plugin boots on: the first read of `orders` (by any method) is preceded by one
 * write (committed before the read: the scan sees it) and followed by others (committed after
 * the read: only their change events tell), as concurrent writers would.
 */
const racing = (store: Store.StoreShape) => {
  let raced = false
  const before = store.insert(Orders, order("m-before", 1))
  const after = Effect.all([
    store.insert(Orders, order("a-after", null)), // sorts before the rows already read
    store.insert(Orders, order("z-after", 5)),
    store.update(Orders, "o-0001", { amount: null }),
    store.delete(Orders, "o-0002"),
    store.insert(Events, { id: "e-after", userId: "u-1", value: 1, converted: true, arm: null })
  ], { discard: true })
  const first = (table: { readonly name: string }) => {
    if (table.name !== Orders.name || raced) return false
    raced = true
    return true
  }
  return {
    ...store,
    find: ((table, options) =>
      first(table) ? Effect.zipRight(before, Effect.tap(store.find(table, options), () => after)) : store.find(table, options)) as Store.StoreShape["find"],
    walk: ((table, options) =>
      first(table)
        ? Stream.concat(Stream.unwrap(Effect.as(before, store.walk(table, options))), Stream.drain(Stream.fromEffect(after)))
        : store.walk(table, options)) as Store.StoreShape["walk"]
  } satisfies Store.StoreShape
}

describe("boot scan", () => {
  it("ids compare by code point", () => {
    assert.isBelow(compareIds("a", "b"), 0)
    assert.isBelow(compareIds("a", "ab"), 0)
    assert.strictEqual(compareIds("o-1", "o-1"), 0)
    assert.isAbove(compareIds("\u{1F600}", "\uFFFD"), 0)
  })

  for (const tier of tiers) {
    it.scoped(`a write during the boot scan is counted once (${tier.name})`, () =>
      Effect.gen(function*() {
        const client = tier.client()
        const base = client === null
          ? Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
          : Store.layerSql.pipe(
            Layer.provideMerge(ChangeTap.layerLocal),
            Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables)).pipe(Layer.provideMerge(client)))
          )
        const context = yield* Layer.build(base.pipe(Layer.orDie))
        const store = context.unsafeMap.get(Store.Store.key) as Store.StoreShape
        // More than one page of rows, so the scan reads in several steps.
        yield* store.insertMany(Orders, Array.from({ length: 1500 }, (_, i) => order(`o-${String(i).padStart(4, "0")}`, i % 10 === 0 ? null : i)))
        const plugin = standingPlugin({ expectations: [volume, nulls], experiments: [trial] })
        const running = yield* Layer.build(plugin.registries.pipe(
          Layer.provideMerge(Layer.scopedDiscard(PluginHost.start(plugin))),
          Layer.provide(FetchHttpClient.layer),
          Layer.provide(Layer.succeed(Store.Store, racing(store))),
          Layer.provide(Layer.succeedContext(context))
        ))
        const tap = context.unsafeMap.get(ChangeTap.ChangeTap.key) as ChangeTap.ChangeTapShape
        yield* tap.settled
        const registry = running.unsafeMap.get(ExpectationRegistry.key) as ExpectationRegistry["Type"]
        const rows = yield* store.find(Orders, { limit: 10_000 })
        const count = (yield* registry.get("volume"))!.metric
        assert.strictEqual(count, rows.length, "every row counted once")
        assert.strictEqual(rows.length, 1500 + 3 - 1)
        const nullRate = (yield* registry.get("nulls"))!.metric!
        assert.approximately(nullRate, rows.filter((row) => row.amount === null).length / rows.length, 1e-12)
        const experiments = running.unsafeMap.get(ExperimentRegistry.key) as ExperimentRegistry["Type"]
        const readout = (yield* experiments.get("trial"))!
        assert.strictEqual(readout.totalExposure, 1)
      }))
  }
})
