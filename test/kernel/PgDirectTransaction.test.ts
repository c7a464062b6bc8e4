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
import { Context, Deferred, Effect, Fiber, Layer, Tracer } from "effect"
import * as PgDirect from "../../src/kernel/PgDirect.js"
import * as Pg from "../support/Pg.js"

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
      // Effect's own tracer, wrapped so that it counts as installed and records every span.
      const native = yield* Effect.tracer
      const spans: Array<string> = []
      const recording = Tracer.make({
        context: native.context,
        span: (...args) => {
          spans.push(args[0])
          return native.span(...args)
        }
      })
      const pid = yield* Effect.withTracer(
        transaction(Effect.zipRight(sql`INSERT INTO tx_notes (id) VALUES ('traced')`, pidInside)),
        recording
      )
      assert.include(spans, "sql.transaction")
      assert.notStrictEqual(pid, reserved)
      assert.deepStrictEqual(yield* ids, ["traced"])
    }))

  it.scopedLive("a statement `now` made while the reserved connection was idle, run once a transaction took it, runs outside that transaction", () =>
    Effect.gen(function*() {
      const { direct, sql, transaction, ids } = yield* setup
      // What the store's point statements do (`getNow`, `insertNow`): the effect is made now, and
      // runs a few fiber steps later, where the fiber may yield to another that opens a transaction.
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

  it.scopedLive("a `point` statement made while the reserved connection was idle, run once a transaction took it, runs outside that transaction", () =>
    Effect.gen(function*() {
      const { direct, sql, transaction, ids } = yield* setup
      const fiber = yield* Effect.withFiberRuntime<Fiber.RuntimeFiber<unknown, unknown>>((fiber) => Effect.succeed(fiber))
      const early = direct.point(fiber, "INSERT INTO tx_notes (id) VALUES ($1) RETURNING id", ["early"], (rows) => rows.length, (error) => error, undefined)
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
      assert.strictEqual(yield* early!, 1)
      yield* Deferred.succeed(release, undefined)
      assert.instanceOf(yield* Fiber.join(writer), Abort)
      assert.deepStrictEqual(yield* ids, ["early"])
    }))
})
