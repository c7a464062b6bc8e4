/**
 * PgSession (real PostgreSQL): its connection's backend terminated while idle and the server's
 * FATAL not yet read, the next statement meets the FATAL; the one after it must not be sent on the
 * same dead connection (node-postgres reports the connection ended only a moment later): it runs
 * on a fresh one.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import * as PgSession from "../../src/kernel/drivers/pg/PgSession.js"
import * as Pg from "../support/Pg.js"
import { terminateUnseen } from "../support/TerminateUnseen.js"

const pidStatement: PgSession.Prepared = { name: "fw_test_pid", text: "SELECT pg_backend_pid() AS pid" }

describe.skipIf(Pg.serverUrl === null)("PgSession after its backend was terminated (PostgreSQL)", () => {
  it.scopedLive("only the statement that meets the FATAL fails: the next runs on a fresh connection", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url) }))
      const session = yield* PgSession.make(Context.get(context, PgClient.PgClient))
      const pid = Effect.map(session.run<{ readonly pid: number }>(pidStatement, []), (rows) => rows[0]!.pid)
      const first = yield* pid
      yield* terminateUnseen(url, first)
      const met = yield* Effect.either(pid)
      assert.strictEqual(met._tag, "Left", "the statement sent after the termination meets the FATAL")
      const after = yield* Effect.either(pid)
      assert.strictEqual(after._tag === "Left" ? String(after.left.cause) : "ok", "ok")
      assert.notStrictEqual(after._tag === "Right" ? after.right : first, first)
    }))
})
