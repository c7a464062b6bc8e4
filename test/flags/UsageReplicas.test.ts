/**
 * Usage counts flushed by several replicas at once (PostgreSQL): each (flag, day, source) row gains
 * every replica's count. A flush reads the row and writes it back: without the row lock, two
 * replicas read the same count and the second write drops the first one's reads (and its newer
 * `lastSeenAt`); two first inserts of one row raced the same way. Sweeps of the same rows at once
 * all succeed.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import * as flagTables from "../../src/flags/tables.js"
import * as Usage from "../../src/flags/Usage.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"

const replica = (url: string) =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) })),
    Layer.orDie
  )

const dayMs = 86_400_000

describe.skipIf(Pg.serverUrl === null)("flag usage across replicas (PostgreSQL)", () => {
  it.scopedLive("concurrent flushes of the same rows lose no count, whether the rows exist or not", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const stores = yield* Effect.forEach([0, 1, 2], () => Effect.map(Layer.build(replica(url)), (ctx) => Context.get(ctx, Store.Store)))
      yield* Effect.provide(SchemaDiffer.apply([...flagTables.all]), PgClient.layer({ url: Redacted.make(url) }).pipe(Layer.orDie))
      const flags = Array.from({ length: 40 }, (_, i) => `flag-${i}`)
      const day = 20_000
      let expected = 0
      for (let round = 0; round < 4; round++) {
        // Each replica counted every flag a different number of times, then all flush at once.
        const buffers = stores.map((_, r) => {
          const buffer = Usage.makeBuffer()
          for (const flag of flags) {
            for (let n = 0; n <= r; n++) buffer.note(flag, "isFlagEnabled", day * dayMs + round * 1000 + r)
          }
          return buffer
        })
        expected += 1 + 2 + 3
        yield* Effect.all(stores.map((store, r) => Usage.flush(store, buffers[r]!)), { concurrency: "unbounded" })
        const rows = yield* stores[0]!.find(flagTables.FlagUsage)
        assert.strictEqual(rows.length, flags.length)
        for (const row of rows) {
          assert.strictEqual(row.count, expected, `${row.flag} after round ${round}`)
          assert.strictEqual(row.lastSeenAt, day * dayMs + round * 1000 + 2, `${row.flag} lastSeenAt after round ${round}`)
        }
      }
      // Every replica sweeps the retention on its own schedule: sweeps of the same old rows at the
      // same moment all succeed, and the rows are gone.
      const later = (day + 200) * dayMs
      const swept = yield* Effect.all(stores.map((store) => Effect.either(Usage.sweep(store, later, 90 * dayMs))), { concurrency: "unbounded" })
      for (const result of swept) assert.strictEqual(result._tag, "Right", JSON.stringify(result))
      assert.deepStrictEqual(yield* stores[0]!.find(flagTables.FlagUsage), [])
    }), 120_000)
})
