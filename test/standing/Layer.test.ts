/**
 * The standing primitives without serving an app (the `layer` path the other areas have):
 * `layerSql` applies the area's tables itself and runs the engine on the provided store, so a
 * script or a background job gets live registries — an expectation moved by a write, a cost
 * recorded against a budget — with no plugin host and no tables applied by hand.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { CostRegistry, defineCostBudget, defineExpectation, ExpectationRegistry, layerMemory, layerSql, tables } from "../../src/standing/index.js"
import { Orders } from "./support.js"

const someOrders = defineExpectation({ name: "some-orders", on: { table: Orders }, invariant: { kind: "rowCount", min: 1 } })
const tokens = defineCostBudget({ name: "tokens", unit: "tokens", limit: 100, window: "day" })

const order = { tenantId: "acme", amount: 5, status: "open", placedAt: 0 }

describe("standing layers (no app served)", () => {
  it.scoped("layerSql on SQLite: its own tables applied, an expectation moved by a write, a cost counted", () =>
    Effect.gen(function*() {
      const expectations = yield* ExpectationRegistry
      const costs = yield* CostRegistry
      assert.strictEqual((yield* expectations.get("some-orders"))?.status, "violated")
      yield* Effect.flatMap(Store.Store, (store) => store.insert(Orders, order))
      assert.strictEqual((yield* expectations.get("some-orders"))?.status, "holding", "moved before the write returned")
      yield* costs.record({ tenantId: "acme", unit: "tokens", amount: 30 })
      assert.strictEqual((yield* costs.budget("tokens", "acme"))?.spent, 30)
    }).pipe(Effect.provide(
      layerSql({ expectations: [someOrders], budgets: [tokens] }).pipe(
        Layer.provideMerge(Store.layerSql),
        Layer.provideMerge(ChangeTap.layerLocal),
        // Only the app's own table: the area's (`tables`) are layerSql's to apply.
        Layer.provide(Layer.effectDiscard(SchemaDiffer.apply([Orders]))),
        Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })),
        Layer.orDie
      )
    )))

  it.scoped("layerMemory on the memory store", () =>
    Effect.gen(function*() {
      const expectations = yield* ExpectationRegistry
      yield* Effect.flatMap(Store.Store, (store) => store.insert(Orders, order))
      assert.strictEqual((yield* expectations.get("some-orders"))?.status, "holding")
    }).pipe(Effect.provide(
      layerMemory({ expectations: [someOrders] }).pipe(Layer.provideMerge(Store.layerMemory), Layer.provideMerge(ChangeTap.layerLocal), Layer.orDie)
    )))

  it("tables lists the area's tables", () => {
    assert.deepStrictEqual(tables.map((table) => table.name), ["_fw_cost_events", "_fw_expectation_state"])
  })
})
