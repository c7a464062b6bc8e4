/**
 * On SQLite a COMMIT that SQLite refuses (a deferred foreign key still violated, `SQLITE_BUSY`
 * while another connection reads) commits nothing: SQLite runs in this process, so no connection
 * can be lost during it, and the outcome is known. Every path answers `StoreUnavailable` (as
 * PostgreSQL's refused COMMIT does), never `CommitUnknown`, leaves nothing open, publishes no
 * change and marks no commit witness: the one-step transaction of a staged insert
 * (`SqliteDirectTransaction`), the client's transaction (a tracer installed, `store.transaction`),
 * and a one-row insert outside a transaction (its own implicit COMMIT).
 */
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Layer, Schema, Tracer } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as CommitWitness from "../../src/kernel/store/CommitWitness.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

const Notes = defineTable("scf_notes", { fields: { text: Schema.String } })

/** Which path ran the test stager, per note id ("statements": the one-step transaction; "effect": the client's). */
const ran = new Map<string, string>()

/** A stager that writes nothing and records which path ran it. */
const stager = Layer.scopedDiscard(Effect.gen(function*() {
  const tap = yield* ChangeTap.ChangeTap
  yield* tap.addStager({
    name: "test",
    stage: (changes) =>
      Effect.sync(() => {
        for (const change of changes) ran.set(change.id, "effect")
      }),
    // eslint-disable-next-line require-yield
    statements: function*(changes) {
      for (const change of changes) ran.set(change.id, "statements")
    }
  })
}))

const fileOf = () => path.join(mkdtempSync(path.join(tmpdir(), "fw-fixes-scf-")), "store.db")

const tier = (options: { readonly file: string; readonly stager: boolean; readonly disableWAL?: boolean }) => {
  const base = Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([Notes])).pipe(
      Layer.provideMerge(SqliteClient.layer({ filename: options.file, disableWAL: options.disableWAL ?? false }))
    ))
  )
  return options.stager ? Layer.merge(base, stager.pipe(Layer.provide(base))) : base
}

/** A tracer that counts as installed (the store then takes the client's path). */
const tracing = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.tracer, (native) => Effect.withTracer(effect, Tracer.make({ context: native.context, span: native.span })))

/** A note whose text is "refuse" writes a row that violates a deferred foreign key: its COMMIT is refused. */
const refuseAtCommit = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE scf_parents (id TEXT PRIMARY KEY)`
  yield* sql`CREATE TABLE scf_guard (id TEXT PRIMARY KEY, parent TEXT REFERENCES scf_parents(id) DEFERRABLE INITIALLY DEFERRED)`
  yield* sql`CREATE TRIGGER scf_refuse AFTER INSERT ON scf_notes WHEN NEW.text = 'refuse'
    BEGIN INSERT INTO scf_guard VALUES (NEW.id, 'missing'); END`
})

/** `effect`'s failure, and whether it marked a commit witness. */
const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const witness = CommitWitness.make()
    const error = yield* Effect.flip(CommitWitness.watched(witness)(effect))
    return { error, committed: witness.committed }
  })

const refused = (code: string) => ({
  error: { _tag: "StoreUnavailable", message: `database error: Failed to execute statement (${code})` },
  committed: false
})

/** `failureOf` as plain data, to compare. */
const plain = (outcome: { readonly error: { readonly _tag: string; readonly message: string }; readonly committed: boolean }) => ({
  error: { _tag: outcome.error._tag, message: outcome.error.message },
  committed: outcome.committed
})

describe("SQLite: a refused COMMIT answers StoreUnavailable and leaves nothing behind", () => {
  it.effect("a deferred foreign key: the one-step transaction and the client's transaction answer alike", () =>
    Effect.gen(function*() {
      ran.clear()
      yield* refuseAtCommit
      const store = yield* Store.Store
      const events = yield* (yield* ChangeTap.ChangeTap).events
      const direct = yield* failureOf(store.insert(Notes, { id: "direct", text: "refuse" }))
      const client = yield* failureOf(tracing(store.insert(Notes, { id: "client", text: "refuse" })))
      const transaction = yield* failureOf(store.transaction(store.insert(Notes, { id: "transaction", text: "refuse" })))
      assert.deepStrictEqual(plain(direct), refused("SQLITE_CONSTRAINT_FOREIGNKEY"))
      assert.deepStrictEqual(plain(client), refused("SQLITE_CONSTRAINT_FOREIGNKEY"))
      assert.deepStrictEqual(plain(transaction), refused("SQLITE_CONSTRAINT_FOREIGNKEY"))
      // Each path was taken as meant.
      assert.deepStrictEqual(Object.fromEntries(ran), { direct: "statements", client: "effect", transaction: "effect" })
      // Nothing was left open: later writes commit, on every path, and only they are published.
      yield* store.insert(Notes, { id: "after-direct", text: "ok" })
      yield* tracing(store.insert(Notes, { id: "after-client", text: "ok" }))
      yield* store.transaction(store.insert(Notes, { id: "after-transaction", text: "ok" }))
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ readonly id: string }>`SELECT id FROM scf_notes ORDER BY id`
      assert.deepStrictEqual(rows.map((row) => row.id), ["after-client", "after-direct", "after-transaction"])
      assert.deepStrictEqual(yield* sql`SELECT * FROM scf_guard`, [])
      const published = [yield* events.take, yield* events.take, yield* events.take]
      assert.deepStrictEqual(published.map((event) => event.id), ["after-direct", "after-client", "after-transaction"])
      assert.strictEqual(yield* events.size, 0)
    }).pipe(Effect.scoped, Effect.provide(tier({ file: fileOf(), stager: true }))))

  it.effect("a deferred foreign key on a one-row insert outside a transaction (its own COMMIT)", () =>
    Effect.gen(function*() {
      yield* refuseAtCommit
      const store = yield* Store.Store
      const direct = yield* failureOf(store.insert(Notes, { id: "direct", text: "refuse" }))
      const client = yield* failureOf(tracing(store.insert(Notes, { id: "client", text: "refuse" })))
      assert.deepStrictEqual(plain(direct), refused("SQLITE_CONSTRAINT_FOREIGNKEY"))
      assert.deepStrictEqual(plain(client), refused("SQLITE_CONSTRAINT_FOREIGNKEY"))
      yield* store.insert(Notes, { id: "after", text: "ok" })
      assert.deepStrictEqual(yield* store.find(Notes, {}), [{ id: "after", text: "ok" }])
    }).pipe(Effect.provide(tier({ file: fileOf(), stager: false }))))

  it.effect("SQLITE_BUSY: another connection reads while the COMMIT needs its lock (rollback journal)", () =>
    Effect.gen(function*() {
      ran.clear()
      const file = fileOf()
      return yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        // Refused at once rather than after the default five seconds of retries.
        yield* sql`PRAGMA busy_timeout = 0`
        const store = yield* Store.Store
        yield* store.insert(Notes, { id: "before", text: "ok" })
        // A reader in another connection holds its shared lock: a writer may write to its journal but not commit.
        const reader = yield* Effect.acquireRelease(
          Effect.sync(() => new Database(file)),
          (db) => Effect.sync(() => db.close())
        )
        reader.exec("BEGIN")
        ran.clear()
        assert.deepStrictEqual(reader.prepare("SELECT COUNT(*) AS n FROM scf_notes").get(), { n: 1 })
        const direct = yield* failureOf(store.insert(Notes, { id: "direct", text: "ok" }))
        const client = yield* failureOf(tracing(store.insert(Notes, { id: "client", text: "ok" })))
        const transaction = yield* failureOf(store.transaction(store.insert(Notes, { id: "transaction", text: "ok" })))
        assert.deepStrictEqual(plain(direct), refused("SQLITE_BUSY"))
        assert.deepStrictEqual(plain(client), refused("SQLITE_BUSY"))
        assert.deepStrictEqual(plain(transaction), refused("SQLITE_BUSY"))
        // Each path was taken as meant.
        assert.deepStrictEqual(Object.fromEntries(ran), { direct: "statements", client: "effect", transaction: "effect" })
        reader.exec("COMMIT")
        yield* store.insert(Notes, { id: "after", text: "ok" })
        yield* store.transaction(store.insert(Notes, { id: "after-transaction", text: "ok" }))
        assert.deepStrictEqual(
          (yield* store.find(Notes, { orderBy: "id" })).map((row) => row.id),
          ["after", "after-transaction", "before"]
        )
      }).pipe(Effect.scoped, Effect.provide(tier({ file, stager: true, disableWAL: true })))
    }))
})
