/**
 * A short write transaction on PostgreSQL runs on the reserved connection, BEGIN and COMMIT sent
 * directly (see `PgDirect.transaction`): it must hold that connection from BEGIN to COMMIT (other
 * fibers' statements take the pool path meanwhile), provide it as the `TransactionConnection`
 * (client statements and savepoints run in the transaction), roll back on failure and
 * interruption, and give the connection back for the next statement.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer } from "effect"
import * as PgDirect from "../../src/kernel/drivers/pg/PgDirect.js"
import * as Pg from "../support/Pg.js"
import { recordingTracer } from "./support/StoreSpans.js"

/** A direct-statement helper over a client on a fresh database with one table. */
const setup = Effect.gen(function*() {
  const url = yield* Pg.freshDatabase
  const sql = Context.get(yield* Layer.build(Pg.layerClient(url)), SqlClient.SqlClient)
  yield* sql`CREATE TABLE tx_notes (id text PRIMARY KEY)`
  const direct = yield* PgDirect.make(sql)
  if (direct === undefined) return yield* Effect.dieMessage("expected direct statements")
  /** The backend a statement outside a transaction runs on (the reserved one when idle). */
  const pidOutside = direct.run<{ readonly pid: number }>(
    "SELECT pg_backend_pid() AS pid",
    [],
    sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`
  ).pipe(Effect.map((rows) => rows[0]!.pid))
  /** The backend of the transaction a client statement runs in. */
  const pidInside = sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`.pipe(Effect.map((rows) => rows[0]!.pid))
  const transaction = <A, E>(body: Effect.Effect<A, E>) => direct.transaction(body, sql.withTransaction(body))
  const ids = sql<{ readonly id: string }>`SELECT id FROM tx_notes ORDER BY id`.pipe(
    Effect.map((rows) => rows.map((row) => row.id))
  )
  return { sql, direct, pidOutside, pidInside, transaction, ids }
})

class Abort {
  readonly _tag = "Abort"
}

describe.skipIf(Pg.serverUrl === null)("PostgreSQL direct transactions", () => {
  it.scopedLive("a transaction runs on the reserved connection and holds it until COMMIT; others take the pool meanwhile", () =>
    Effect.gen(function*() {
      const { sql, pidOutside, pidInside, transaction, ids } = yield* setup
      const reserved = yield* pidOutside
      const opened = yield* Deferred.make<number>()
      const release = yield* Deferred.make<void>()
      const writer = yield* Effect.fork(transaction(Effect.gen(function*() {
        yield* sql`INSERT INTO tx_notes (id) VALUES ('a')`
        yield* Deferred.succeed(opened, yield* pidInside)
        yield* Deferred.await(release)
      })))
      assert.strictEqual(yield* Deferred.await(opened), reserved)
      // Meanwhile another fiber's statement runs elsewhere and does not see the uncommitted row.
      assert.notStrictEqual(yield* pidOutside, reserved)
      assert.deepStrictEqual(yield* ids, [])
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(writer)
      assert.deepStrictEqual(yield* ids, ["a"])
      // Given back: the next statement runs on it again.
      assert.strictEqual(yield* pidOutside, reserved)
    }))

  it.scopedLive("a failed body rolls back; a nested savepoint rolls back alone; the connection is given back", () =>
    Effect.gen(function*() {
      const { sql, pidOutside, transaction, ids } = yield* setup
      const reserved = yield* pidOutside
      const failed = yield* Effect.flip(transaction(Effect.zipRight(sql`INSERT INTO tx_notes (id) VALUES ('gone')`, Effect.fail(new Abort()))))
      assert.instanceOf(failed, Abort)
      yield* transaction(Effect.gen(function*() {
        yield* sql`INSERT INTO tx_notes (id) VALUES ('kept')`
        const inner = yield* Effect.flip(
          sql.withTransaction(Effect.zipRight(sql`INSERT INTO tx_notes (id) VALUES ('inner')`, Effect.fail(new Abort())))
        )
        assert.instanceOf(inner, Abort)
        // A statement error inside: the savepoint rolls back, the transaction goes on.
        const duplicate: SqlError | Abort = yield* Effect.flip(sql.withTransaction(sql`INSERT INTO tx_notes (id) VALUES ('kept')`))
        assert.notInstanceOf(duplicate, Abort)
        yield* sql`INSERT INTO tx_notes (id) VALUES ('later')`
      }))
      assert.deepStrictEqual(yield* ids, ["kept", "later"])
      assert.strictEqual(yield* pidOutside, reserved)
    }))

  it.scopedLive("an interrupted body rolls back and gives the connection back", () =>
    Effect.gen(function*() {
      const { sql, pidOutside, transaction, ids } = yield* setup
      const reserved = yield* pidOutside
      const opened = yield* Deferred.make<void>()
      const writer = yield* Effect.fork(transaction(Effect.gen(function*() {
        yield* sql`INSERT INTO tx_notes (id) VALUES ('interrupted')`
        yield* Deferred.succeed(opened, undefined)
        return yield* Effect.never
      })))
      yield* Deferred.await(opened)
      yield* Fiber.interrupt(writer)
      assert.deepStrictEqual(yield* ids, [])
      assert.strictEqual(yield* pidOutside, reserved)
      yield* transaction(sql`INSERT INTO tx_notes (id) VALUES ('next')`)
      assert.deepStrictEqual(yield* ids, ["next"])
    }))

  it.scopedLive("with a tracer installed, a transaction goes through the client: its sql.transaction span is there", () =>
    Effect.gen(function*() {
      const { sql, pidOutside, pidInside, transaction, ids } = yield* setup
      const reserved = yield* pidOutside
      const { spans, tracer } = yield* recordingTracer
      const pid = yield* Effect.withTracer(
        transaction(Effect.zipRight(sql`INSERT INTO tx_notes (id) VALUES ('traced')`, pidInside)),
        tracer
      )
      assert.include(spans.map((span) => span.name), "sql.transaction")
      assert.notStrictEqual(pid, reserved)
      assert.deepStrictEqual(yield* ids, ["traced"])
    }))

  it.scopedLive("a statement `now` made while the reserved connection was idle, run once a transaction took it, runs outside that transaction", () =>
    Effect.gen(function*() {
      const { direct, sql, transaction, ids } = yield* setup
      // An effect of `now` is made now and may run a few fiber steps later, where the fiber may
      // have yielded to another that opens a transaction.
      const fiber = yield* Effect.withFiberRuntime<Fiber.RuntimeFiber<unknown, unknown>>((fiber) => Effect.succeed(fiber))
      const early = direct.now<never>(fiber, "INSERT INTO tx_notes (id) VALUES ($1)", ["early"])
      assert.isDefined(early)
      const opened = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const writer = yield* Effect.fork(Effect.flip(transaction(Effect.gen(function*() {
        yield* sql`INSERT INTO tx_notes (id) VALUES ('held')`
        yield* Deferred.succeed(opened, undefined)
        yield* Deferred.await(release)
        return yield* Effect.fail(new Abort())
      }))))
      yield* Deferred.await(opened)
      yield* early!
      yield* Deferred.succeed(release, undefined)
      assert.instanceOf(yield* Fiber.join(writer), Abort)
      // The insert answered as done outside any transaction: the other's rollback must not take it away.
      assert.deepStrictEqual(yield* ids, ["early"])
    }))

  it.scopedLive("`send` runs at once on the idle reserved connection, answering in node-postgres's callback; while a transaction holds it, on another", () =>
    Effect.gen(function*() {
      const { direct, pidOutside, transaction, ids } = yield* setup
      const reserved = yield* pidOutside
      const fiber = yield* Effect.withFiberRuntime<Fiber.RuntimeFiber<unknown, unknown>>((fiber) => Effect.succeed(fiber))
      /** `send`'s answer (and its context), or `false` when nothing was sent. */
      const send = (text: string, parameters: ReadonlyArray<unknown>) =>
        Effect.async<false | { readonly error: SqlError | undefined; readonly rows: ReadonlyArray<Record<string, unknown>>; readonly context: string }>(
          (resume) => {
            const sent = direct.send(fiber, text, parameters, (error, rows, context) => resume(Effect.succeed({ error, rows, context })), "ctx")
            if (!sent) resume(Effect.succeed(false))
          }
        )
      const answered = yield* send("SELECT pg_backend_pid() AS pid, $1::text AS echo", ["hi"])
      assert.notStrictEqual(answered, false)
      if (answered === false) return
      assert.isUndefined(answered.error)
      assert.deepStrictEqual(answered.rows, [{ pid: reserved, echo: "hi" }])
      assert.strictEqual(answered.context, "ctx")
      // A failure is the client's SqlError, with its message.
      const failed = yield* send("SELECT * FROM no_such_table", [])
      assert.notStrictEqual(failed, false)
      if (failed === false) return
      assert.strictEqual(failed.error?._tag, "SqlError")
      assert.strictEqual(failed.error?.message, "Failed to execute statement")
      assert.deepStrictEqual(failed.rows, [])
      // While another fiber's transaction holds the reserved connection, the statement is sent on
      // another one, outside that transaction: its rollback keeps the row.
      const opened = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const writer = yield* Effect.fork(Effect.flip(transaction(Effect.gen(function*() {
        yield* Deferred.succeed(opened, undefined)
        yield* Deferred.await(release)
        return yield* Effect.fail(new Abort())
      }))))
      yield* Deferred.await(opened)
      const beside = yield* send("INSERT INTO tx_notes (id) VALUES ($1)", ["beside"])
      assert.notStrictEqual(beside, false)
      yield* Deferred.succeed(release, undefined)
      assert.instanceOf(yield* Fiber.join(writer), Abort)
      assert.deepStrictEqual(yield* ids, ["beside"])
      // Given back: sent on it again.
      const again = yield* send("INSERT INTO tx_notes (id) VALUES ($1) RETURNING id", ["after"])
      assert.notStrictEqual(again, false)
      assert.deepStrictEqual(yield* ids, ["after", "beside"])
    }))
})
