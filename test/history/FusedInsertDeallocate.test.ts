/**
 * The one-statement insert is a named prepared statement (`PgDirect.prepare`): node-postgres
 * remembers per connection which names it parsed and from then on sends only the name. A
 * `DEALLOCATE ALL` on that connection (run by app code inside a store transaction, which runs on
 * the same reserved connection) leaves the driver's memory stale: the statement must be parsed
 * again. Today every later insert on that connection fails its one statement ("prepared statement
 * … does not exist", a refusal) and is run again as a transaction: the rows are right, the fast
 * path is lost on that connection for good.
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

const Docs = defineTable("docs", { fields: { title: Schema.String } })

describe.skipIf(Pg.serverUrl === null)("one-statement insert after DEALLOCATE ALL (PostgreSQL)", () => {
  it.scopedLive("a prepared statement the server no longer has is parsed again on that connection", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      // A pool of 3: direct statements hold one reserved connection (`PgDirectSlots.most`), on
      // which the inserts and the store's transactions run.
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
      /** The prepared statements of the connection a store transaction runs on (the reserved one). */
      const prepared = store.transaction(sql<{ readonly pid: number; readonly names: ReadonlyArray<string> | null }>`SELECT pg_backend_pid() AS pid, (SELECT array_agg(name ORDER BY name) FROM pg_prepared_statements) AS names`).pipe(
        Effect.map((rows) => rows[0]!)
      )
      yield* store.insert(Docs, { id: "a", title: "a" })
      yield* store.insert(Docs, { id: "b", title: "b" })
      const before = yield* prepared
      assert.include(before.names ?? [], "fw_prepared_1")
      // App code in a transaction: on PostgreSQL it runs on the reserved connection the inserts use.
      yield* store.transaction(sql`DEALLOCATE ALL`)
      for (const id of ["c", "d", "e"]) yield* store.insert(Docs, { id, title: id })
      const after = yield* prepared
      assert.strictEqual(after.pid, before.pid, "the same connection")
      // Without a fresh parse every insert on this connection fails its one statement ("prepared
      // statement does not exist") and is run again as a transaction: correct, but slower for good.
      assert.include(after.names ?? [], "fw_prepared_1", "the one-statement insert is prepared again")
    }), 60_000)
})
