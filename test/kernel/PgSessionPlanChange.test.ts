/**
 * PgSession (real PostgreSQL): a prepared statement whose result type a schema change altered
 * (`ALTER TABLE … ALTER COLUMN … TYPE`, as a migration in a rolling upgrade does) is prepared again:
 * the server refuses the old one ("cached plan must not change result type") on that connection
 * for good, so a session that kept the connection would fail every later read. The refused
 * statement did not run: it runs again at once on a fresh connection. Statements already queued on
 * the old connection behind it run there before it is ended.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted, Schedule } from "effect"
import * as PgSession from "../../src/kernel/drivers/pg/PgSession.js"
import * as Pg from "../support/Pg.js"

const read: PgSession.Prepared = { name: "fw_test_read", text: "SELECT id, v FROM plan_change WHERE id = $1" }
const echo: PgSession.Prepared = { name: "fw_test_echo", text: "SELECT $1::text AS echo" }

/** A fresh database with the table `plan_change` (row 1 → 10), an admin connection and a session on it. */
const setUp = Effect.gen(function*() {
  const url = yield* Pg.freshDatabase
  const admin = yield* Pg.connection(url)
  yield* Effect.promise(() => admin.query("CREATE TABLE plan_change (id int PRIMARY KEY, v int); INSERT INTO plan_change VALUES (1, 10)"))
  const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url) }))
  const session = yield* PgSession.make(Context.get(context, PgClient.PgClient))
  return { admin, session }
})

describe.skipIf(Pg.serverUrl === null)("PgSession after a schema change (PostgreSQL)", () => {
  it.scopedLive("a statement whose result type changed answers again, prepared afresh on a fresh connection", () =>
    Effect.gen(function*() {
      const { admin, session } = yield* setUp
      const run = session.run<{ id: number; v: unknown }>(read, [1])
      assert.deepStrictEqual(yield* run, [{ id: 1, v: 10 }])
      yield* Effect.promise(() => admin.query("ALTER TABLE plan_change ALTER COLUMN v TYPE text"))
      const after = yield* Effect.all([run, run, run].map((effect) => Effect.either(effect)))
      assert.deepStrictEqual(
        after.map((exit) => exit._tag === "Left" ? String(exit.left.cause) : exit.right),
        [[{ id: 1, v: "10" }], [{ id: 1, v: "10" }], [{ id: 1, v: "10" }]]
      )
    }))

  it.scopedLive("a statement queued behind the refused one on the same connection runs there, not failed by the connection's replacement", () =>
    Effect.gen(function*() {
      const { admin, session } = yield* setUp
      assert.deepStrictEqual(yield* session.run(read, [1]), [{ id: 1, v: 10 }])
      yield* Effect.promise(() => admin.query("ALTER TABLE plan_change ALTER COLUMN v TYPE text"))
      // Sent together (as the fleet tap's outbox read and its announcement are): the echo waits on
      // the connection behind the read the server refuses. Ending that connection at once failed it
      // ("Connection terminated") though it was never sent and the connection was sound.
      const after = yield* Effect.all([session.run(read, [1]), session.run(echo, ["behind"])].map(Effect.either), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(
        after.map((exit) => exit._tag === "Left" ? String(exit.left.cause) : exit.right),
        [[{ id: 1, v: "10" }], [{ echo: "behind" }]]
      )
      // The refused statement's connection is ended once its queue is done: one session connection is left.
      const sessions = () =>
        Effect.promise(() =>
          admin.query<{ readonly n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%echo%'"
          )
        ).pipe(Effect.map((result) => result.rows[0]!.n))
      yield* session.run(echo, ["after"])
      const left = yield* sessions().pipe(
        Effect.filterOrFail((n) => n === 1),
        Effect.retry(Schedule.spaced("20 millis")),
        Effect.timeoutOption("5 seconds")
      )
      assert.deepStrictEqual(left, Option.some(1))
    }))
})
