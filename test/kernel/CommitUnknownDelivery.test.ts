/**
 * A write whose COMMIT reached PostgreSQL and committed, but whose answer was lost with the
 * connection: the caller gets `CommitUnknown`, and under fleet scope the writing replica still
 * delivers the change to its own listeners once its outbox read shows that it committed.
 *
 * A TCP proxy between the store and PostgreSQL forwards the COMMIT and then cuts that connection
 * before the reply comes back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import pg from "pg"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"
import { cuttingProxy } from "./support/CuttingProxy.js"

const Notes = defineTable("notes", { fields: { text: Schema.String } })

describe.skipIf(Pg.serverUrl === null)("a COMMIT whose answer was lost (PostgreSQL, fleet scope)", () => {
  it.scopedLive("answers CommitUnknown, and the writing replica delivers the committed change to its own listeners", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const target = new URL(url)
      const proxy = yield* cuttingProxy(target, "COMMIT")
      const layer = Store.layerSql.pipe(
        Layer.provideMerge(ChangeTap.layerFleet({ pollMs: 300 })),
        Layer.provideMerge(Pg.layerClient(proxy.url))
      )
      const context = yield* Layer.build(layer)
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(context))
      const received: Array<ChangeEvent> = []
      const tap = yield* Effect.provide(ChangeTap.ChangeTap, context)
      yield* tap.subscribe({ name: "test", onEvent: (event) => Effect.sync(() => void received.push(event)) })
      const store = yield* Effect.provide(Store.Store, context)
      yield* store.insert(Notes, { id: "before", text: "plain" })

      proxy.arm()
      // In a transaction: a one-row insert alone is one statement, without a COMMIT (see FusedInsert.test.ts).
      const outcome = yield* Effect.flip(store.transaction(store.insert(Notes, { id: "lost", text: "answer lost" })))
      assert.strictEqual(outcome._tag, "CommitUnknown")
      const stored = yield* Effect.promise(async () => {
        const client = new pg.Client({ connectionString: url })
        await client.connect()
        try {
          return (await client.query(`SELECT id FROM notes WHERE id = 'lost'`)).rowCount
        } finally {
          await client.end()
        }
      })
      assert.strictEqual(stored, 1, "the write committed")
      for (let i = 0; i < 100 && !received.some((e) => e.id === "lost"); i++) yield* Effect.sleep("100 millis")
      assert.deepStrictEqual(received.map((e) => e.id), ["before", "lost"])
      assert.notStrictEqual(received[1]!.remote, true)
    }), 60_000)
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
