/**
 * The SQLite tier runs point reads and one-row inserts straight on the better-sqlite3 handle. It
 * must keep the client's transaction rules: a statement outside a transaction neither sees nor
 * joins another fiber's open transaction (it waits its turn), while inside its own it sees its own
 * writes. With a tracer installed the statements still go through the client and get their spans.
 */
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Option, Schema } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as SqliteDirect from "../../src/kernel/drivers/sqlite/SqliteDirect.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as HeldTransaction from "./support/HeldTransaction.js"
import * as RecordingTap from "./support/RecordingTap.js"
import * as StoreSpans from "./support/StoreSpans.js"

const Notes = defineTable("direct_notes", { fields: { text: Schema.String } })

const tier = (filename: string) =>
  Store.layerSql.pipe(
    Layer.provideMerge(RecordingTap.layer()),
    Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([Notes])).pipe(
      Layer.provideMerge(SqliteClient.layer({ filename }))
    ))
  )

const tiers = {
  "in memory": () => tier(":memory:"),
  file: () => tier(path.join(mkdtempSync(path.join(tmpdir(), "fw-direct-")), "store.db"))
}


for (const [name, make] of Object.entries(tiers)) {
  describe(`SQLite direct statements (${name})`, () => {
    it.live("a read outside a transaction does not see another fiber's uncommitted row; it waits for the transaction", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const held = yield* HeldTransaction.hold(store, Notes, { id: "pending", text: "uncommitted" })
        const reader = yield* Effect.fork(store.get(Notes, "pending"))
        yield* Effect.repeatN(Effect.yieldNow(), 5)
        // Still waiting, or answered without the uncommitted row: never read inside the writer's transaction.
        const early = yield* Fiber.poll(reader)
        if (Option.isSome(early)) assert.isTrue(Exit.isSuccess(early.value) && Option.isNone(early.value.value))
        yield* held.release
        assert.isTrue(yield* held.rolledBack)
        assert.isTrue(Option.isNone(yield* Fiber.join(reader)))
        assert.isTrue(Option.isNone(yield* store.get(Notes, "pending")))
      }).pipe(Effect.provide(make())))

    it.live("an insert outside a transaction does not join another fiber's transaction: its rollback keeps the row", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const held = yield* HeldTransaction.hold(store, Notes, { id: "rolled-back", text: "x" })
        const outside = yield* Effect.fork(store.insert(Notes, { id: "kept", text: "y" }))
        yield* Effect.repeatN(Effect.yieldNow(), 5)
        yield* held.release
        assert.isTrue(yield* held.rolledBack)
        assert.strictEqual((yield* Fiber.join(outside)).id, "kept")
        assert.strictEqual(Option.getOrThrow(yield* store.get(Notes, "kept")).text, "y")
        assert.isTrue(Option.isNone(yield* store.get(Notes, "rolled-back")))
      }).pipe(Effect.provide(make())))

    it.effect("inside a transaction, reads see the transaction's own writes; a duplicate id is DuplicateRow", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const seen = yield* store.transaction(Effect.gen(function*() {
          yield* store.insert(Notes, { id: "mine", text: "own" })
          const duplicate = yield* Effect.flip(store.insert(Notes, { id: "mine", text: "again" }))
          assert.strictEqual(duplicate._tag, "DuplicateRow")
          return yield* store.get(Notes, "mine")
        }))
        assert.strictEqual(Option.getOrThrow(seen).text, "own")
        const outside = yield* Effect.flip(store.insert(Notes, { id: "mine", text: "again" }))
        assert.strictEqual(outside._tag, "DuplicateRow")
      }).pipe(Effect.provide(make())))
  })
}

describe("SQLite direct statements: when they are used", () => {
  it.effect("an @effect/sql-sqlite-node client gives direct statements; one with name transforms does not", () =>
    Effect.gen(function*() {
      const plain = yield* Effect.flatMap(SqlClient.SqlClient, SqliteDirect.make).pipe(
        Effect.provide(SqliteClient.layer({ filename: ":memory:" }))
      )
      assert.isDefined(plain)
      const transformed = yield* Effect.flatMap(SqlClient.SqlClient, SqliteDirect.make).pipe(
        Effect.provide(SqliteClient.layer({ filename: ":memory:", transformResultNames: (name) => name.toUpperCase() }))
      )
      assert.isUndefined(transformed)
    }))

  it.effect("with a tracer installed, point reads and inserts go through the client: fw.store spans with sql.execute children", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      yield* StoreSpans.assertThroughClient(Effect.gen(function*() {
        yield* store.insert(Notes, { id: "traced", text: "t" })
        assert.strictEqual(Option.getOrThrow(yield* store.get(Notes, "traced")).text, "t")
      }))
    }).pipe(Effect.provide(tiers["in memory"]())))
})
