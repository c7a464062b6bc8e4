/**
 * On SQLite a one-row insert whose stagers are written as statements (`StageStatements`) commits
 * with its staging in one synchronous step on the better-sqlite3 handle. It must do what the
 * client's transaction does: the row and the stagers' rows commit together or not at all, a
 * failing statement surfaces the same typed error, stagers read across tenants and see the write,
 * and another fiber's open transaction is neither joined nor overtaken.
 *
 * The test stager tags the rows it writes with the path that ran it (its `statements` write
 * "statements", its effect "effect"), so each case also shows which path was taken.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Schema, Tracer } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import type { PendingChange } from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as StageStatements from "../../src/kernel/store/StageStatements.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as HeldTransaction from "./support/HeldTransaction.js"

const Notes = defineTable("stx_notes", { fields: { tenantId: Schema.String, text: Schema.String }, tenantField: "tenantId" })
/** What the test stager writes per change: how many notes it saw, and which path ran it. */
const Staged = defineTable("stx_staged", { fields: { noteId: Schema.String, seen: Schema.Number, path: Schema.String } })

/** The staged row's id for a note: a note id ending in "!clash" makes two changes stage the same id. */
const stagedId = (noteId: string) => noteId.endsWith("!clash") ? "clash" : `staged:${noteId}`

const plan = (path: "statements" | "effect") =>
  function*(changes: ReadonlyArray<PendingChange>): StageStatements.Plan<void> {
    for (const change of changes) {
      if (change.table !== Notes.name) continue
      // Every tenant's notes, the written one included (it is in the transaction).
      const notes = yield* StageStatements.find(Notes, {})
      yield* StageStatements.insert(Staged, [{ id: stagedId(change.id), noteId: change.id, seen: notes.length, path }])
    }
  }

/** The test stager; `statements: false` gives it no statement form. */
const stager = (options: { readonly statements: boolean }) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const tap = yield* ChangeTap.ChangeTap
    const store = yield* Store.Store
    const effect = plan("effect")
    yield* tap.addStager({
      name: "test",
      stage: (changes) => StageStatements.run(store, () => effect(changes)),
      ...(options.statements ? { statements: plan("statements") } : {})
    })
  }))

const tier = (options: { readonly statements: boolean }) => {
  const base = Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([Notes, Staged])).pipe(
      Layer.provideMerge(SqliteClient.layer({ filename: path.join(mkdtempSync(path.join(tmpdir(), "fw-stx-")), "store.db") }))
    ))
  )
  return Layer.merge(base, stager(options).pipe(Layer.provide(base)))
}

/** A tracer that counts as installed (the store then takes the client's path and makes spans). */
const tracing = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.tracer, (native) => Effect.withTracer(effect, Tracer.make({ context: native.context, span: native.span })))

const stagedOf = (id: string) =>
  Effect.flatMap(Store.Store, (store) => Effect.map(store.get(Staged, stagedId(id)), Option.getOrUndefined))


describe("SQLite: a one-row insert and its staging in one step", () => {
  it.effect("the row and the stager's rows commit together; the stager reads every tenant and sees the row", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      yield* store.insert(Notes, { id: "other", tenantId: "t2", text: "theirs" })
      const written = yield* Subject.actingAs(
        store.insert(Notes, { id: "mine", tenantId: "t1", text: "x" }),
        Subject.make({ type: "user", id: "u", tenantId: "t1" })
      )
      assert.strictEqual(written.id, "mine")
      assert.deepStrictEqual(yield* stagedOf("mine"), { id: "staged:mine", noteId: "mine", seen: 2, path: "statements" })
      assert.deepStrictEqual((yield* stagedOf("other"))?.path, "statements")
    }).pipe(Effect.provide(tier({ statements: true }))))

  it.effect("a failing stager statement rolls the row back, with the error the client's transaction gives", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      yield* store.insert(Notes, { id: "a!clash", tenantId: "t1", text: "first" })
      // The second note's staged row takes the first one's id: DuplicateRow, either way.
      const direct = yield* Effect.flip(store.insert(Notes, { id: "b!clash", tenantId: "t1", text: "second" }))
      const client = yield* Effect.flip(tracing(store.insert(Notes, { id: "c!clash", tenantId: "t1", text: "third" })))
      assert.deepStrictEqual({ ...direct }, { ...client })
      assert.strictEqual(direct._tag, "DuplicateRow")
      assert.isTrue(Option.isNone(yield* store.get(Notes, "b!clash")))
      assert.isTrue(Option.isNone(yield* store.get(Notes, "c!clash")))
      // A stager table that is gone: StoreUnavailable, either way, and nothing committed.
      const sql = yield* SqlClient.SqlClient
      yield* sql`DROP TABLE stx_staged`
      const gone = yield* Effect.flip(store.insert(Notes, { id: "d", tenantId: "t1", text: "x" }))
      const goneClient = yield* Effect.flip(tracing(store.insert(Notes, { id: "e", tenantId: "t1", text: "x" })))
      assert.strictEqual(gone._tag, "StoreUnavailable")
      assert.strictEqual(goneClient._tag, "StoreUnavailable")
      assert.deepStrictEqual(yield* store.find(Notes, { orderBy: "id" }), [{ id: "a!clash", tenantId: "t1", text: "first" }])
      // The handle is left usable: no transaction stays open.
      yield* SchemaDiffer.apply([Staged])
      yield* store.insert(Notes, { id: "f", tenantId: "t1", text: "x" })
      assert.strictEqual((yield* stagedOf("f"))?.path, "statements")
    }).pipe(Effect.provide(tier({ statements: true }))))

  it.effect("a tracer installed, or a stager without statements: the client's transaction runs the stager", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      yield* tracing(store.insert(Notes, { id: "traced", tenantId: "t1", text: "x" }))
      assert.strictEqual((yield* stagedOf("traced"))?.path, "effect")
    }).pipe(Effect.provide(tier({ statements: true }))))

  it.effect("a stager without statements: the client's transaction, same outcome", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      yield* store.insert(Notes, { id: "plain", tenantId: "t1", text: "x" })
      assert.strictEqual((yield* stagedOf("plain"))?.path, "effect")
    }).pipe(Effect.provide(tier({ statements: false }))))

  it.live("while another fiber's transaction is open, the insert waits its turn and does not join it", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const held = yield* HeldTransaction.hold(store, Notes, { id: "rolled-back", tenantId: "t1", text: "x" })
      const outside = yield* Effect.fork(store.insert(Notes, { id: "kept", tenantId: "t1", text: "y" }))
      yield* Effect.repeatN(Effect.yieldNow(), 5)
      yield* held.release
      assert.isTrue(yield* held.rolledBack)
      assert.strictEqual((yield* Fiber.join(outside)).id, "kept")
      assert.isTrue(Option.isNone(yield* store.get(Notes, "rolled-back")))
      assert.isUndefined(yield* stagedOf("rolled-back"))
      // It saw only itself: the other transaction had rolled back (it waited for it).
      assert.deepStrictEqual(yield* stagedOf("kept"), { id: "staged:kept", noteId: "kept", seen: 1, path: "effect" })
    }).pipe(Effect.provide(tier({ statements: true }))))

  it.effect("committed inserts are published once, in order, with their refs", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const tap = yield* ChangeTap.ChangeTap
      const events = yield* tap.events
      yield* store.insert(Notes, { id: "p1", tenantId: "t1", text: "x" })
      yield* Effect.flip(store.insert(Notes, { id: "p1", tenantId: "t1", text: "again" }))
      yield* store.insert(Notes, { id: "p2", tenantId: "t1", text: "y" })
      const published = [yield* events.take, yield* events.take]
      assert.deepStrictEqual(published.map((event) => [event.table, event.op, event.id]), [["stx_notes", "insert", "p1"], ["stx_notes", "insert", "p2"]])
      assert.isTrue(published.every((event) => typeof event.ref === "string"))
      assert.notStrictEqual(published[0]!.ref, published[1]!.ref)
      assert.strictEqual(yield* events.size, 0)
    }).pipe(Effect.scoped, Effect.provide(tier({ statements: true }))))
})
