/**
 * `Store.purge`: framework bookkeeping deletes (the search plugin's pending-sync markers) — the
 * listed rows go in one statement per chunk, absent ids are skipped, and no change event is
 * published; app tables are refused.
 */
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Schema } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"

const Marks = defineTable("_fw_test_marks", { fields: { n: Schema.Number } })
const Docs = defineTable("docs", { fields: { n: Schema.Number } })

const sqlTier = (client: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([Marks, Docs])).pipe(Layer.provideMerge(client))),
    Layer.orDie
  )

const tiers: ReadonlyArray<readonly [string, () => Layer.Layer<Store.Store | ChangeTap.ChangeTap>]> = [
  ["memory", () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))],
  ["sqlite", () => sqlTier(SqliteClient.layer({ filename: ":memory:" }))],
  ...(Pg.serverUrl === null ? [] : [["postgresql", () => sqlTier(Pg.layerFreshClient)] as const])
]

for (const [name, tier] of tiers) {
  describe(`Store.purge: ${name}`, () => {
    it.scoped("deletes the listed rows (2,500: several statements), skips absent ids, announces nothing; joins a transaction", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const tap = yield* ChangeTap.ChangeTap
        const ids = Array.from({ length: 2_500 }, (_, i) => `m${i}`)
        yield* store.insertMany(Marks, ids.map((id, n) => ({ id, n })))
        yield* tap.settled
        const announced: Array<string> = []
        yield* tap.subscribe({ name: "spy", onEvent: (event) => Effect.sync(() => void announced.push(event.table)) })
        yield* store.purge(Marks, [...ids.slice(0, 2_400), "absent"])
        yield* store.purge(Marks, [])
        assert.deepStrictEqual((yield* store.find(Marks, { orderBy: "n" })).map((row) => row.id), ids.slice(2_400))
        // Inside a transaction it rolls back with it.
        const exit = yield* Effect.exit(store.transaction(Effect.zipRight(store.purge(Marks, ["m2400"]), Effect.fail("abort"))))
        assert.isTrue(Exit.isFailure(exit))
        assert.strictEqual(yield* store.count(Marks), 100)
        yield* tap.settled
        assert.deepStrictEqual(announced, [])
      }).pipe(Effect.provide(tier())))

    it.scoped("refuses a table that is not the framework's own", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Docs, { id: "d1", n: 1 })
        const exit = yield* Effect.exit(store.purge(Docs, ["d1"]))
        assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
        assert.strictEqual(yield* store.count(Docs), 1)
      }).pipe(Effect.provide(tier())))
  })
}
