/**
 * Concurrent direct statements on PostgreSQL (see `PgDirectSlots`): they run on several reserved
 * connections (waiting for one given back rather than taking the client's pool path), never on
 * more than the pool allows, never inside another fiber's transaction, and a terminated backend
 * among them is replaced while the others serve.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import type { SqlError } from "@effect/sql/SqlError"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option, Redacted, Schedule } from "effect"
import * as PgDirect from "../../src/kernel/drivers/pg/PgDirect.js"
import * as PgDirectSlots from "../../src/kernel/drivers/pg/PgDirectSlots.js"
import * as Pg from "../support/Pg.js"

/** Direct statements over a client of `maxConnections` (the pool's default when absent) on a fresh database. */
const setup = (maxConnections?: number) =>
  Effect.gen(function*() {
    const url = yield* Pg.freshDatabase
    const layer = PgClient.layer({ url: Redacted.make(url), ...(maxConnections === undefined ? {} : { maxConnections }) })
    const sql = Context.get(yield* Layer.build(layer.pipe(Layer.orDie)), SqlClient.SqlClient)
    yield* sql`CREATE TABLE slot_notes (id text PRIMARY KEY)`
    const direct = yield* PgDirect.make(sql)
    if (direct === undefined) return yield* Effect.dieMessage("expected direct statements")
    let poolPath = 0
    /** `text` directly; counts the statements that took the client's pool path instead. */
    const run = <A>(text: string, parameters: ReadonlyArray<unknown> = []) =>
      direct.run<A>(
        text,
        parameters,
        Effect.suspend(() => {
          poolPath++
          return sql.unsafe<A & object>(text, parameters)
        })
      )
    const pid = (sleep = 0) =>
      Effect.map(run<{ readonly pid: number }>(`SELECT pg_backend_pid() AS pid, pg_sleep($1)`, [sleep]), (rows) => rows[0]!.pid)
    const ids = Effect.map(sql<{ readonly id: string }>`SELECT id FROM slot_notes ORDER BY id`, (rows) => rows.map((row) => row.id))
    const backends = Effect.map(
      sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()`,
      (rows) => rows[0]!.n
    )
    const transaction = <A, E>(body: Effect.Effect<A, E>) => direct.transaction(body, sql.withTransaction(body))
    return { url, sql, direct, run, pid, ids, backends, transaction, poolPath: () => poolPath }
  })

class Abort {
  readonly _tag = "Abort"
}

describe.skipIf(Pg.serverUrl === null)("PostgreSQL direct statements on several connections", () => {
  it.scopedLive("concurrent statements run directly on several reserved connections, none through the pool path, within the pool's size", () =>
    Effect.gen(function*() {
      const { backends, pid, poolPath } = yield* setup()
      // Twice as many in flight as connections direct statements may hold: the rest wait for one.
      const most = PgDirectSlots.most(undefined)
      const pids = yield* Effect.all(Array.from({ length: 2 * most }, () => pid(0.05)), { concurrency: "unbounded" })
      assert.strictEqual(poolPath(), 0)
      const distinct = new Set(pids).size
      assert.isAbove(distinct, 1)
      assert.isAtMost(distinct, most)
      // The pool's default size (10) bounds the client's connections, reserved ones included.
      assert.isAtMost(yield* backends, 10)
    }))

  it.scopedLive("with a pool of 3, direct statements hold one connection; while a transaction holds it, statements take the pool path", () =>
    Effect.gen(function*() {
      const { backends, direct, pid, poolPath, transaction, sql, ids } = yield* setup(3)
      const pids = yield* Effect.all(Array.from({ length: 6 }, () => pid(0.02)), { concurrency: "unbounded" })
      assert.strictEqual(new Set(pids).size, 1)
      assert.strictEqual(poolPath(), 0)
      const opened = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const writer = yield* Effect.fork(Effect.flip(transaction(Effect.gen(function*() {
        yield* sql`INSERT INTO slot_notes (id) VALUES ('held')`
        yield* Deferred.succeed(opened, undefined)
        yield* Deferred.await(release)
        return yield* Effect.fail(new Abort())
      }))))
      yield* Deferred.await(opened)
      // No connection will be given back without the transaction's fiber: nothing waits for one.
      const fiber = yield* Effect.withFiberRuntime<Fiber.RuntimeFiber<unknown, unknown>>((fiber) => Effect.succeed(fiber))
      assert.isFalse(direct.send(fiber, "SELECT 1", [], () => {}, undefined))
      assert.notStrictEqual(yield* pid(), pids[0])
      assert.strictEqual(poolPath(), 1)
      yield* Deferred.succeed(release, undefined)
      assert.instanceOf(yield* Fiber.join(writer), Abort)
      assert.deepStrictEqual(yield* ids, [])
      assert.strictEqual(yield* pid(), pids[0])
      assert.isAtMost(yield* backends, 3)
    }))

  it.scopedLive("with a pool of 1, nothing is reserved: a transaction or a statement beside a running one is served", () =>
    Effect.gen(function*() {
      const { direct, pid, poolPath, sql, ids, transaction } = yield* setup(1)
      // Reserving the pool's only connection left none for the client's own path: a transaction
      // begun while a direct statement ran waited for a pool connection that never came back, and
      // could not even be interrupted. Awaited from outside (a daemon), so a stuck one fails the test.
      const slow = yield* Effect.fork(pid(0.3))
      const writer = yield* Effect.forkDaemon(transaction(sql`INSERT INTO slot_notes (id) VALUES ('beside')`))
      const written = yield* Effect.timeoutOption(Fiber.await(writer), "5 seconds")
      assert.isTrue(Option.isSome(written) && Exit.isSuccess(written.value), "the transaction beside a statement completed")
      yield* Fiber.join(slow)
      assert.deepStrictEqual(yield* ids, ["beside"])
      // Without a reserved connection every statement outside a transaction takes the client's path.
      const fiber = yield* Effect.withFiberRuntime<Fiber.RuntimeFiber<unknown, unknown>>((fiber) => Effect.succeed(fiber))
      assert.isFalse(direct.send(fiber, "SELECT 1", [], () => {}, undefined))
      yield* pid()
      assert.strictEqual(poolPath(), 2)
    }))

  it.scopedLive("an interrupted statement of a direct transaction is cancelled and rolled back while every pool connection waits for its lock", () =>
    Effect.gen(function*() {
      // A pool of 3: one reserved connection (the direct transaction's), two for the client.
      const { direct, sql } = yield* setup(3)
      yield* sql`INSERT INTO slot_notes (id) VALUES ('hot')`
      const locked = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(Effect.either(Effect.timeout(
        direct.transaction(
          Effect.gen(function*() {
            yield* sql`SELECT id FROM slot_notes WHERE id = 'hot' FOR UPDATE`
            yield* Deferred.succeed(locked, undefined)
            yield* direct.run(`SELECT pg_sleep(30)`, [], sql.unsafe(`SELECT pg_sleep(30)`))
          }),
          Effect.dieMessage("expected a direct transaction")
        ),
        "300 millis"
      )))
      yield* Deferred.await(locked)
      // Both pool connections: transactions waiting for the row lock the direct transaction holds.
      const waiting = yield* Effect.fork(Effect.all(
        Array.from({ length: 2 }, () => sql.withTransaction(sql`SELECT id FROM slot_notes WHERE id = 'hot' FOR UPDATE`)),
        { concurrency: "unbounded" }
      ))
      // The cancellation needed a pool connection: it waited for them, they for the lock, for good.
      const held = yield* Effect.timeoutOption(Fiber.await(holder), "4 seconds")
      assert.isTrue(Option.isSome(held), "the interrupted transaction ended")
      const waited = yield* Effect.timeoutOption(Fiber.await(waiting), "4 seconds")
      assert.isTrue(Option.isSome(waited) && Exit.isSuccess(waited.value), "the transactions waiting for its lock went on")
    }))

  it.scopedLive("under concurrent transactions and statements, no statement outside a transaction runs in another fiber's", () =>
    Effect.gen(function*() {
      const { direct, run, sql, ids, transaction } = yield* setup(6)
      const fiberOf = Effect.withFiberRuntime<Fiber.RuntimeFiber<unknown, unknown>>((fiber) => Effect.succeed(fiber))
      /** `send` as an effect (the client's path when it declines). */
      const send = (id: string) =>
        Effect.flatMap(fiberOf, (fiber) =>
          Effect.async<void, SqlError>((resume) => {
            const sent = direct.send(fiber, "INSERT INTO slot_notes (id) VALUES ($1)", [id], (error) =>
              resume(error === undefined ? Effect.void : Effect.fail(error)), undefined)
            if (!sent) resume(Effect.asVoid(sql`INSERT INTO slot_notes (id) VALUES (${id})`))
          }))
      const expected: Array<string> = []
      const worker = (w: number) =>
        Effect.forEach(Array.from({ length: 12 }, (_, i) => i), (i) => {
          const kind = (w + i) % 3
          if (kind === 0) {
            // Rolled back: a statement of another fiber that ran in it would vanish with it.
            return Effect.ignore(transaction(Effect.zipRight(
              sql`INSERT INTO slot_notes (id) VALUES (${`rolled-${w}-${i}`})`,
              Effect.zipRight(Effect.sleep("2 millis"), Effect.fail(new Abort()))
            )))
          }
          const id = `kept-${w}-${i}`
          expected.push(id)
          return kind === 1 ? send(id) : Effect.asVoid(run(`INSERT INTO slot_notes (id) VALUES ($1)`, [id]))
        })
      yield* Effect.all(Array.from({ length: 12 }, (_, w) => worker(w)), { concurrency: "unbounded" })
      assert.deepStrictEqual(yield* ids, expected.sort())
    }))

  it.scopedLive("a terminated backend among several reserved connections is dropped and replaced; the others serve meanwhile", () =>
    Effect.gen(function*() {
      const { backends, pid, url } = yield* setup(6)
      const before = new Set(yield* Effect.all(Array.from({ length: 8 }, () => pid(0.05)), { concurrency: "unbounded" }))
      assert.isAbove(before.size, 1)
      const victim = [...before][0]!
      const admin = yield* Pg.connection(url)
      yield* Effect.promise(() => admin.query(`SELECT pg_terminate_backend($1)`, [victim]))
      // A statement racing the termination may fail as it would through the pool.
      const retried = pid(0.01).pipe(Effect.retry(Schedule.intersect(Schedule.recurs(20), Schedule.spaced("10 millis"))))
      for (let round = 0; round < 10; round++) {
        const pids = yield* Effect.all(Array.from({ length: 8 }, () => retried), { concurrency: "unbounded" })
        assert.notInclude(pids, victim)
      }
      const after = new Set(yield* Effect.all(Array.from({ length: 8 }, () => pid(0.05)), { concurrency: "unbounded" }))
      assert.isAbove(after.size, 1)
      assert.isAtMost(yield* backends, 6 + 1)
    }))
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
