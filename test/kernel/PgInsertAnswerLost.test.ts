/**
 * A one-row insert outside a transaction on PostgreSQL is autocommitted: when the connection fails
 * after the server ran it, the row may be there. The store must then answer `CommitUnknown` and
 * mark the commit witness (the idempotency binding keeps the key: a retry must not write again),
 * not `StoreUnavailable`, which says nothing was committed (the key is released and the retried
 * request inserts a second row).
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Schema } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as CommitWitness from "../../src/kernel/store/CommitWitness.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"
import { cuttingProxy } from "./support/CuttingProxy.js"
import { recordingTracer } from "./support/StoreSpans.js"

const Notes = defineTable("lost_notes", { fields: { title: Schema.String } })

describe.skipIf(Pg.serverUrl === null)("a one-row insert whose answer is lost (PostgreSQL)", () => {
  it.scopedLive("answers CommitUnknown and marks the witness when the row may be written (directly or through the client); inside a transaction StoreUnavailable", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const proxy = yield* cuttingProxy(new URL(url), "lost-outside", "lost-traced", "lost-inside")
      const client = PgClient.layer({ url: Redacted.make(proxy.url) }).pipe(Layer.orDie)
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(client))
      // A local tap without stagers: the insert is the one autocommitted statement sent directly.
      const context = yield* Layer.build(Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provideMerge(client)))
      const store = yield* Effect.provide(Store.Store, context)
      yield* store.insert(Notes, { id: "before", title: "before" })
      const admin = yield* Pg.connection(url)
      const ids = Effect.promise(() => admin.query<{ readonly id: string }>(`SELECT id FROM lost_notes ORDER BY id`)).pipe(
        Effect.map((result) => result.rows.map((row) => row.id))
      )

      const witness = CommitWitness.make()
      proxy.arm()
      const outside = yield* Effect.flip(CommitWitness.watched(witness)(store.insert(Notes, { id: "lost-outside", title: "x" })))
      // The server ran and committed it: only its answer was lost.
      assert.deepStrictEqual(yield* ids, ["before", "lost-outside"])
      assert.strictEqual(outside._tag, "CommitUnknown")
      assert.isTrue(witness.committed)

      // Under a tracer the insert takes the client's path (with its spans): the same outcome.
      const { tracer } = yield* recordingTracer
      const traced = CommitWitness.make()
      proxy.arm()
      const viaClient = yield* Effect.flip(
        CommitWitness.watched(traced)(Effect.withTracer(store.insert(Notes, { id: "lost-traced", title: "t" }), tracer))
      )
      assert.deepStrictEqual(yield* ids, ["before", "lost-outside", "lost-traced"])
      assert.strictEqual(viaClient._tag, "CommitUnknown")
      assert.isTrue(traced.committed)

      // Inside a transaction nothing commits without the COMMIT, which the lost connection cannot send.
      const inner = CommitWitness.make()
      proxy.arm()
      const inside = yield* Effect.flip(CommitWitness.watched(inner)(store.transaction(store.insert(Notes, { id: "lost-inside", title: "y" }))))
      assert.strictEqual(inside._tag, "StoreUnavailable")
      assert.isFalse(inner.committed)
      assert.deepStrictEqual(yield* ids, ["before", "lost-outside", "lost-traced"])

      // The store serves on afterwards.
      yield* store.insert(Notes, { id: "after", title: "after" })
      assert.deepStrictEqual(yield* ids, ["after", "before", "lost-outside", "lost-traced"])
    }), 60_000)
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
