/**
 * Reindex at full size: 100,000 rows (`BENCH_SEARCH_REINDEX_ROWS`) in a SQLite file, reindexed by
 * the search plugin into the sql backend (FTS5 in the same database) in pages of
 * `reindexBatchSize`. Reports the time against a plain keyset walk of the same table in the same
 * run (the peer: reading alone), the heap's growth during the walk (retained memory, sampled
 * after a collection every tenth page when run with `node --expose-gc --import tsx`: bounded by the
 * page, not the table), and that nothing is orphaned (a document planted in the index for a row
 * that does not exist is gone after the swap, and the index holds exactly the table's ids).
 */
import { FetchHttpClient } from "@effect/platform"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Sql from "../../src/search/Sql.js"
import { searchIndex, searchPlugin } from "../../src/search/index.js"
import { searchTables } from "../../src/search/tables.js"
import * as PluginHost from "../../src/server/PluginHost.js"
import { table } from "../support.js"

const N = Number(process.env.BENCH_SEARCH_REINDEX_ROWS ?? 100_000)
const PAGE = 1000
const Notes = defineTable("notes", {
  fields: { tenantId: Schema.String, title: Schema.String, body: Schema.String },
  tenantField: "tenantId"
})
const words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split(" ")

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`

export const run = async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "fw-bench-reindex-"))
  const client = SqliteClient.layer({ filename: path.join(dir, "bench.db") })
  const plugin = searchPlugin({
    backend: Sql.backend(client),
    indexes: { notes: searchIndex(Notes, { index: "notes", tenantField: "tenantId", map: (row) => ({ ...row }) }) },
    sync: { resyncIntervalMs: 0, reindexBatchSize: PAGE }
  })
  const stack = Layer.scopedDiscard(PluginHost.start(plugin)).pipe(
    Layer.provideMerge(Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([Notes, ...searchTables])).pipe(Layer.provideMerge(client)))
    )),
    Layer.provide(FetchHttpClient.layer)
  )
  try {
    const figures = await Effect.runPromise(Effect.gen(function*() {
      const store = yield* Store.Store
      const tap = yield* ChangeTap.ChangeTap
      const { engine, backend } = yield* plugin.running
      // Rows written straight into the table, with the plugin's listener busy behind: wait for it.
      for (let i = 0; i < N; i += PAGE) {
        yield* store.insertMany(Notes, Array.from({ length: Math.min(PAGE, N - i) }, (_, k) => {
          const n = i + k
          return {
            id: `r${String(n).padStart(7, "0")}`,
            tenantId: `t${n % 10}`,
            title: `${words[n % words.length]} ${words[(n * 7) % words.length]} ${n}`,
            body: `${words[(n * 3) % words.length]} ${words[(n * 11) % words.length]} note ${n}`
          }
        }))
      }
      yield* tap.settled
      // Drift behind the plugin's back: an orphan in the index, and a row missing from it.
      yield* backend.upsert("notes", [{ id: "ghost", tenantId: "t0", title: "orphan", body: "" }])
      yield* backend.remove("notes", ["r0000003"])
      // The peer: a plain keyset walk of the same table in the same pages.
      const walkStart = performance.now()
      const walked = yield* Stream.runCount(store.walk(Notes, { pageSize: PAGE }))
      const walkMs = performance.now() - walkStart
      globalThis.gc?.()
      const heapBefore = process.memoryUsage().heapUsed
      let heapPeak = heapBefore
      const start = performance.now()
      let pages = 0
      // What the reindex retains, not garbage awaiting collection: with `node --expose-gc`, a
      // collection before every tenth page's sample (the timing includes those collections).
      const result = yield* engine.reindex("notes", () =>
        Effect.sync(() => {
          if (pages++ % 10 !== 0) return
          globalThis.gc?.()
          heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)
        }))
      const reindexMs = performance.now() - start
      const rows = Option.getOrThrow(result).rows
      const ids = new Set<string>()
      yield* Stream.runForEach(backend.documents!("notes"), (doc) => Effect.sync(() => void ids.add(doc.id)))
      return { walked, walkMs, reindexMs, rows, heapBefore, heapPeak, ids: ids.size, ghost: ids.has("ghost"), restored: ids.has("r0000003") }
    }).pipe(Effect.provide(stack), Effect.scoped))
    table(`search: reindex of ${N.toLocaleString("en-US")} rows (SQLite file, sql backend, pages of ${PAGE})`, [
      { measure: "plain keyset walk of the table (peer)", value: `${(figures.walkMs / 1000).toFixed(2)} s (${figures.walked} rows)` },
      { measure: "reindex into a fresh index + swap", value: `${(figures.reindexMs / 1000).toFixed(2)} s (${figures.rows} rows)` },
      { measure: "ratio reindex / walk", value: (figures.reindexMs / figures.walkMs).toFixed(1) },
      {
        measure: `heap retained during the reindex (peak over start${globalThis.gc === undefined ? ", NO --expose-gc: includes garbage" : ", after gc"})`,
        value: mb(figures.heapPeak - figures.heapBefore)
      },
      { measure: "index ids after the swap = table rows", value: `${figures.ids} = ${N}: ${figures.ids === N ? "yes" : "NO"}` },
      { measure: "planted orphan gone / missing row restored", value: `${figures.ghost ? "NO" : "yes"} / ${figures.restored ? "yes" : "NO"}` }
    ])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
