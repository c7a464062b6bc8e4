/**
 * The PostgreSQL tier runs its point statements straight on a connection (see `PgDirect`): outside
 * a transaction on one reserved from the pool, inside one on the transaction's. It must keep the
 * client's rules: a statement outside a transaction neither sees nor joins another fiber's open
 * transaction, a busy reserved connection never makes another statement wait, an interrupted
 * statement is cancelled on the server, a dead connection is replaced, and with a tracer installed
 * the statements still go through the client and get their spans.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer, Option, Redacted, Schedule, Schema } from "effect"
import type pg from "pg"
import * as PgDirect from "../../src/kernel/drivers/pg/PgDirect.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"
import * as HeldTransaction from "./support/HeldTransaction.js"
import * as RecordingTap from "./support/RecordingTap.js"
import * as StoreSpans from "./support/StoreSpans.js"

const Notes = defineTable("direct_notes", { fields: { text: Schema.String } })
const Others = defineTable("direct_others", { fields: { text: Schema.String } })
/** Plain columns of every kind and presence: a row read by id may be handed over as node-postgres built it. */
const Plain = defineTable("direct_plain", {
  fields: {
    flag: Schema.Boolean,
    n: Schema.Number,
    note: Schema.optional(Schema.String),
    owner: Schema.NullOr(Schema.String),
    tag: Schema.optional(Schema.NullOr(Schema.String))
  }
})

/** A field whose decoding throws for one value: a schema's transformation with a bug. */
const Touchy = defineTable("direct_touchy", {
  fields: {
    text: Schema.transform(Schema.String, Schema.String, {
      decode: (text) => {
        if (text === "boom") throw new Error("decode threw")
        return text
      },
      encode: (text) => text
    })
  }
})

/** The store on a fresh database, and that database's URL. */
const tier = Effect.gen(function*() {
  const url = yield* Pg.freshDatabase
  const context = yield* Layer.build(
    Store.layerSql.pipe(
      Layer.provideMerge(RecordingTap.layer()),
      Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([Notes, Others, Plain, Touchy])).pipe(Layer.provideMerge(Pg.layerClient(url))))
    )
  )
  return { store: Effect.runSync(Effect.provide(Store.Store, context)), url }
})


/** Runs `query` on a connection of its own (a lock holder, an administrator). */
const on = <A>(client: pg.Client, query: string, values: Array<unknown> = []) =>
  Effect.promise(() => client.query(query, values).then((result) => result.rows as Array<A>))

/** Until some backend of the database waits for a lock (a statement is blocked). */
const untilBlocked = (admin: pg.Client) =>
  Effect.promise(async () => {
    for (let i = 0; i < 500; i++) {
      const { rows } = await admin.query(
        `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
      )
      if (rows.length > 0) return
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    throw new Error("no statement ever waited for the lock")
  })

describe.skipIf(Pg.serverUrl === null)("PostgreSQL direct statements", () => {
  it.scopedLive("a read outside a transaction does not see another fiber's uncommitted row", () =>
    Effect.gen(function*() {
      const { store } = yield* tier
      const held = yield* HeldTransaction.hold(store, Notes, { id: "pending", text: "uncommitted" })
      assert.isTrue(Option.isNone(yield* store.get(Notes, "pending")))
      yield* held.release
      assert.isTrue(yield* held.rolledBack)
      assert.isTrue(Option.isNone(yield* store.get(Notes, "pending")))
    }))

  it.scopedLive("an insert outside a transaction does not join another fiber's transaction: its rollback keeps the row", () =>
    Effect.gen(function*() {
      const { store } = yield* tier
      const held = yield* HeldTransaction.hold(store, Notes, { id: "rolled-back", text: "x" })
      assert.strictEqual((yield* store.insert(Notes, { id: "kept", text: "y" })).id, "kept")
      yield* held.release
      assert.isTrue(yield* held.rolledBack)
      assert.strictEqual(Option.getOrThrow(yield* store.get(Notes, "kept")).text, "y")
      assert.isTrue(Option.isNone(yield* store.get(Notes, "rolled-back")))
    }))

  it.scopedLive("inside a transaction, reads see its own writes; a duplicate id is DuplicateRow and the transaction still commits", () =>
    Effect.gen(function*() {
      const { store } = yield* tier
      const seen = yield* store.transaction(Effect.gen(function*() {
        yield* store.insert(Notes, { id: "mine", text: "own" })
        const duplicate = yield* Effect.flip(store.insert(Notes, { id: "mine", text: "again" }))
        assert.strictEqual(duplicate._tag, "DuplicateRow")
        yield* store.insert(Notes, { id: "after", text: "a" })
        return yield* store.get(Notes, "mine")
      }))
      assert.strictEqual(Option.getOrThrow(seen).text, "own")
      assert.strictEqual(Option.getOrThrow(yield* store.get(Notes, "after")).text, "a")
      assert.strictEqual((yield* Effect.flip(store.insert(Notes, { id: "mine", text: "again" })))._tag, "DuplicateRow")
    }))

  it.scopedLive("a statement blocked on the reserved connection does not hold up another fiber's statement", () =>
    Effect.gen(function*() {
      const { store, url } = yield* tier
      yield* store.insert(Notes, { id: "locked", text: "l" })
      yield* store.insert(Notes, { id: "free", text: "f" })
      const locker = yield* Pg.connection(url)
      const admin = yield* Pg.connection(url)
      yield* on(locker, "BEGIN")
      yield* on(locker, `SELECT * FROM direct_notes WHERE id = 'locked' FOR UPDATE`)
      // Outside a transaction a locking read is one statement: it runs on the reserved connection and waits.
      const blocked = yield* Effect.fork(store.get(Notes, "locked", { forUpdate: true }))
      yield* untilBlocked(admin)
      // Answered meanwhile, through the pool.
      assert.strictEqual(Option.getOrThrow(yield* store.get(Notes, "free")).text, "f")
      assert.strictEqual((yield* store.insert(Notes, { id: "meanwhile", text: "m" })).id, "meanwhile")
      yield* on(locker, "COMMIT")
      assert.strictEqual(Option.getOrThrow(yield* Fiber.join(blocked)).text, "l")
    }))

  it.scopedLive("an interrupted statement is cancelled on the server: its transaction ends without waiting for the lock", () =>
    Effect.gen(function*() {
      const { store, url } = yield* tier
      yield* store.insert(Notes, { id: "locked", text: "before" })
      const locker = yield* Pg.connection(url)
      const admin = yield* Pg.connection(url)
      yield* on(locker, "BEGIN")
      yield* on(locker, `SELECT * FROM direct_notes WHERE id = 'locked' FOR UPDATE`)
      const update = yield* Effect.fork(store.update(Notes, "locked", { text: "after" }))
      yield* untilBlocked(admin)
      // Without the cancellation the interruption would wait for the lock, which is released only below.
      yield* Fiber.interrupt(update)
      const waiting = yield* on<{ readonly n: string }>(
        admin,
        `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
      )
      assert.strictEqual(Number(waiting[0]!.n), 0)
      yield* on(locker, "COMMIT")
      assert.strictEqual(Option.getOrThrow(yield* store.get(Notes, "locked")).text, "before")
    }))

  it.scopedLive("an interrupted read by id leaves at once; its late answer reaches no later read", () =>
    Effect.gen(function*() {
      const { store, url } = yield* tier
      for (let i = 0; i < 5; i++) yield* store.insert(Notes, { id: `n${i}`, text: `t${i}` })
      yield* store.insert(Others, { id: "o", text: "other" })
      const locker = yield* Pg.connection(url)
      const admin = yield* Pg.connection(url)
      yield* on(locker, "BEGIN")
      yield* on(locker, "LOCK TABLE direct_notes IN ACCESS EXCLUSIVE MODE")
      // A read by id waits for no row lock, only for a table's exclusive lock: it runs on the reserved connection and waits.
      const blocked = yield* Effect.fork(store.get(Notes, "n0"))
      yield* untilBlocked(admin)
      yield* Fiber.interrupt(blocked)
      // Answered meanwhile, through the pool.
      assert.strictEqual(Option.getOrThrow(yield* store.get(Others, "o")).text, "other")
      yield* on(locker, "COMMIT")
      // Once the interrupted read's answer arrived, reads run on the reserved connection again, each with its own row.
      for (let round = 0; round < 3; round++) {
        for (let i = 4; i >= 0; i--) assert.strictEqual(Option.getOrThrow(yield* store.get(Notes, `n${i}`)).text, `t${i}`)
      }
      assert.isTrue(Option.isNone(yield* store.get(Notes, "missing")))
    }))

  it.scopedLive("a decoding that throws, in a read by id or after a one-row insert, is the caller's defect; the connection goes on serving", () =>
    Effect.gen(function*() {
      const { store, url } = yield* tier
      const admin = yield* Pg.connection(url)
      yield* on(admin, `INSERT INTO direct_touchy (id, text) VALUES ('bad', 'boom'), ('good', 'fine')`)
      const defectOf = <A, E>(exit: Exit.Exit<A, E>) =>
        Exit.isFailure(exit) ? Option.map(Cause.dieOption(exit.cause), (defect) => (defect as Error).message) : Option.none()
      // The row is decoded in node-postgres's callback: a throw there must reach the reader, not the driver.
      assert.deepStrictEqual(defectOf(yield* Effect.exit(store.get(Touchy, "bad"))), Option.some("decode threw"))
      assert.strictEqual(Option.getOrThrow(yield* store.get(Touchy, "good")).text, "fine")
      // The written row is decoded once the insert answered (it is written, as before).
      assert.deepStrictEqual(defectOf(yield* Effect.exit(store.insert(Touchy, { id: "new", text: "boom" }))), Option.some("decode threw"))
      assert.deepStrictEqual(yield* on(admin, `SELECT id FROM direct_touchy WHERE id = 'new'`), [{ id: "new" }])
      assert.strictEqual((yield* store.insert(Touchy, { id: "next", text: "ok" })).text, "ok")
      assert.strictEqual(Option.getOrThrow(yield* store.get(Touchy, "next")).text, "ok")
    }))

  it.scopedLive("a read by id answers the decoded row exactly: every presence of a field, undeclared columns left out, a numeric column read back as text", () =>
    Effect.gen(function*() {
      const { store, url } = yield* tier
      const rows = [
        { id: "all", flag: true, n: 1.5, note: "n", owner: "ada", tag: "t" },
        { id: "nulls", flag: false, n: -2.5, owner: null, tag: null },
        { id: "absent", flag: false, n: 0, owner: null },
        { id: "mixed", flag: true, n: 1e21, note: "", owner: "", tag: "" }
      ]
      for (const row of rows) yield* store.insert(Plain, row)
      const expected = (row: Record<string, unknown>) => ({ tag: null, ...row })
      const readAll = Effect.forEach(rows, (row) => Effect.map(store.get(Plain, row.id), Option.getOrThrow))
      const check = (read: ReadonlyArray<unknown>) =>
        rows.forEach((row, i) => {
          // The decoded row of the schema, keys in its order: `tag` (optional, nullable) reads back null when absent.
          const want = Schema.decodeUnknownSync(Plain.schema)(expected(row))
          assert.deepStrictEqual(read[i], want)
          assert.strictEqual(JSON.stringify(read[i]), JSON.stringify(want))
        })
      check(yield* readAll)
      const admin = yield* Pg.connection(url)
      yield* on(admin, `ALTER TABLE direct_plain ADD COLUMN legacy TEXT DEFAULT 'x'`)
      check(yield* readAll)
      yield* on(admin, `ALTER TABLE direct_plain ALTER COLUMN n TYPE NUMERIC`)
      check(yield* readAll)
    }))

  it.scopedLive("a terminated connection is replaced: statements go on succeeding", () =>
    Effect.gen(function*() {
      const { store, url } = yield* tier
      yield* store.insert(Notes, { id: "n", text: "t" })
      const admin = yield* Pg.connection(url)
      const gone = yield* on<{ readonly pid: number }>(
        admin,
        `SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
      )
      assert.isAbove(gone.length, 0)
      // A statement racing the termination may fail as it would through the pool; the store recovers.
      const read = store.get(Notes, "n").pipe(Effect.retry(Schedule.intersect(Schedule.recurs(50), Schedule.spaced("10 millis"))))
      for (let i = 0; i < 50; i++) assert.strictEqual(Option.getOrThrow(yield* read).text, "t")
      for (let i = 0; i < 20; i++) yield* store.insert(Notes, { id: `after-${i}`, text: "a" })
      assert.strictEqual((yield* store.find(Notes)).length, 21)
    }))

  it.scopedLive("with a tracer installed, point reads and inserts go through the client: fw.store spans with sql.execute children", () =>
    Effect.gen(function*() {
      const { store } = yield* tier
      yield* StoreSpans.assertThroughClient(Effect.gen(function*() {
        yield* store.insert(Notes, { id: "traced", text: "t" })
        assert.strictEqual(Option.getOrThrow(yield* store.get(Notes, "traced")).text, "t")
      }))
    }))

  it.scopedLive("an @effect/sql-pg client gives direct statements; one with name transforms does not", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const direct = (options: Partial<PgClient.PgClientConfig>) =>
        Effect.flatMap(SqlClient.SqlClient, PgDirect.make).pipe(
          Effect.provide(PgClient.layer({ url: Redacted.make(url), ...options }).pipe(Layer.orDie))
        )
      assert.isDefined(yield* direct({}))
      assert.isUndefined(yield* direct({ transformResultNames: (name) => name.toUpperCase() }))
    }))
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
