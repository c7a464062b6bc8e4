/**
 * Row history across replicas: two store instances (two "processes", each with its own pool,
 * fleet change tap and history plugin) on one PostgreSQL, updating the same row at once.
 */
import { FetchHttpClient } from "@effect/platform"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Schema } from "effect"
import * as PluginHost from "../../src/server/PluginHost.js"
import { rowAsOf, rowHistory, rowHistoryPlugin, RowHistory } from "../../src/history/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"

const Docs = defineTable("docs", { fields: { title: Schema.String } })

/** One replica with row history on (`sync` mode). */
const replica = (url: string) =>
  Layer.scopedDiscard(PluginHost.start(rowHistoryPlugin())).pipe(
    Layer.provideMerge(Store.layerSql),
    Layer.provideMerge(ChangeTap.layerFleet({ pollMs: 2_000 })),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 8 })),
    Layer.provide(FetchHttpClient.layer)
  )

describe.skipIf(Pg.serverUrl === null)("row history across replicas (PostgreSQL)", () => {
  it.scopedLive("20 rounds of 20 concurrent updates of one row from two replicas: gapless, and rowAsOf(now) is the committed row", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(Pg.layerClient(url)))
      const a = yield* Layer.build(replica(url))
      const b = yield* Layer.build(replica(url))
      const storeA = yield* Effect.provide(Store.Store, a)
      const storeB = yield* Effect.provide(Store.Store, b)
      const problems: Array<string> = []
      for (let round = 0; round < 20; round++) {
        const id = `row-${round}`
        yield* storeA.insert(Docs, { id, title: "0" })
        const outcomes = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => i),
          (i) => Effect.either((i % 2 === 0 ? storeA : storeB).update(Docs, id, { title: `${round}.${i}` })),
          { concurrency: "unbounded" }
        )
        const failed = outcomes.filter((outcome) => outcome._tag === "Left").map((outcome) => outcome.left._tag)
        if (failed.length > 0) problems.push(`round ${round}: ${failed.length} updates answered ${failed[0]}`)
        const versions = (yield* rowHistory(storeA, Docs, id, null)).map((v) => v.version)
        if (versions.join() !== Array.from({ length: 21 }, (_, i) => i + 1).join()) {
          problems.push(`round ${round}: versions ${versions.join(",")}`)
        }
        const committed = yield* storeA.get(Docs, id)
        const asOf = yield* rowAsOf(storeA, Docs, id, null, Number.MAX_SAFE_INTEGER)
        if (committed._tag === "None" || asOf?.title !== committed.value.title) {
          problems.push(`round ${round}: rowAsOf(now) ${String(asOf?.title)} but committed ${committed._tag === "Some" ? committed.value.title : "none"}`)
        }
      }
      assert.deepStrictEqual(problems, [])
    }), 120_000)

  it.scopedLive("a write with history on makes one outbox row; history records are not change events", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(Pg.layerClient(url)))
      const a = yield* Layer.build(replica(url))
      const storeA = yield* Effect.provide(Store.Store, a)
      const tables: Array<string> = []
      yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) =>
        tap.subscribe({ name: "seen", onEvent: (event) => Effect.sync(() => void tables.push(event.table)) })).pipe(Effect.provide(a))
      yield* storeA.insert(Docs, { id: "d", title: "1" })
      yield* storeA.update(Docs, "d", { title: "2" })
      yield* storeA.delete(Docs, "d")
      const sql = yield* Effect.provide(PgClient.PgClient, a)
      const [outbox] = yield* sql<{ readonly n: string }>`SELECT COUNT(*)::text AS n FROM _fw_change_outbox`
      assert.strictEqual(outbox?.n, "3")
      assert.strictEqual((yield* rowHistory(storeA, Docs, "d", null)).length, 3)
      // Listeners (and live queries) see the app's changes, not the history records.
      yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.settled).pipe(Effect.provide(a))
      assert.deepStrictEqual(tables, ["docs", "docs", "docs"])
    }))
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
