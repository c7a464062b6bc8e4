/**
 * The reserved connection of the direct path, its backend terminated while idle
 * (`pg_terminate_backend`) and the server's FATAL not yet read by node-postgres: it hands the FATAL
 * to the next statement sent on it, which answers `CommitUnknown` (the client cannot tell). The
 * statement after that must not be sent on the same dead connection (node-postgres reports the
 * connection ended only a moment later): it takes another and succeeds.
 */
import { FetchHttpClient } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Schema } from "effect"
import { rowHistoryPlugin, RowHistory } from "../../src/history/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as PluginHost from "../../src/server/PluginHost.js"
import * as Pg from "../support/Pg.js"
import { terminateUnseen } from "../support/TerminateUnseen.js"

const Docs = defineTable("docs", { fields: { title: Schema.String } })

describe.skipIf(Pg.serverUrl === null)("one-statement insert after its connection's backend was terminated (PostgreSQL)", () => {
  it.scopedLive("only the first write after the termination can fail: the next ones run on a fresh connection", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      // A pool of 3: direct statements hold one reserved connection (`PgDirectSlots.most`), the one terminated.
      const client = PgClient.layer({ url: Redacted.make(url), maxConnections: 3 }).pipe(Layer.orDie)
      yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(client))
      const context = yield* Layer.build(
        Layer.scopedDiscard(PluginHost.start(rowHistoryPlugin())).pipe(
          Layer.provideMerge(Store.layerSql),
          Layer.provideMerge(ChangeTap.layerLocal),
          Layer.provideMerge(client),
          Layer.provide(FetchHttpClient.layer)
        )
      )
      const store = yield* Effect.provide(Store.Store, context)
      const sql = yield* Effect.provide(SqlClient.SqlClient, context)
      yield* store.insert(Docs, { id: "a", title: "a" })
      // A store transaction runs on the reserved connection the inserts use.
      const [{ pid }] = yield* store.transaction(sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`)
      const outcomes: Array<string> = []
      for (const id of ["b", "c", "d"]) {
        // The first insert is sent in the same turn of the event loop as the termination returns.
        if (id === "b") yield* terminateUnseen(url, pid)
        const result = yield* Effect.either(store.insert(Docs, { id, title: id }))
        outcomes.push(result._tag === "Right" ? "ok" : result.left._tag)
      }
      // The first meets the FATAL; none after it may be sent on the dead connection.
      assert.deepStrictEqual(outcomes, ["CommitUnknown", "ok", "ok"], `outcomes: ${outcomes.join(", ")}`)
      const rows = yield* sql<{ readonly id: string }>`SELECT id FROM docs ORDER BY id`
      assert.deepStrictEqual(rows.map((row) => row.id), ["a", "c", "d"])
    }), 60_000)
})
