/**
 * Row history: insert throughput with the plugin on against off, on SQLite (file) and PostgreSQL,
 * and `rowAsOf` latency on a row with 10,000 versions.
 */
import { FetchHttpClient } from "@effect/platform"
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Redacted, Schema } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as PluginHost from "../src/server/PluginHost.js"
import { rowAsOf, rowHistoryPlugin, RowHistory } from "../src/history/index.js"
import type { RowHistoryPlugin } from "../src/history/index.js"
import * as ChangeTap from "../src/kernel/ChangeTap.js"
import * as SchemaDiffer from "../src/kernel/SchemaDiffer.js"
import * as Store from "../src/kernel/Store.js"
import { defineTable } from "../src/kernel/Table.js"
import { scratchDatabase } from "./pgDatabase.js"
import { perSecond, table } from "./support.js"

const Docs = defineTable("docs", { fields: { title: Schema.String, n: Schema.Number } })
const N = 1_000
const VERSIONS = 10_000

const stack = (client: Layer.Layer<SqlClient.SqlClient, unknown>, history: RowHistoryPlugin | null) =>
  (history !== null ? Layer.scopedDiscard(PluginHost.start(history)) : Layer.empty).pipe(
    Layer.provideMerge(Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provide(Layer.effectDiscard(SchemaDiffer.apply([Docs, RowHistory])).pipe(Layer.provideMerge(client)))
    )),
    Layer.provide(FetchHttpClient.layer)
  )

/** Inserts per second; with batched history, the clock stops once every version is recorded. */
const inserts = (prefix: string, history: RowHistoryPlugin | null) =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    const start = performance.now()
    for (let i = 0; i < N; i++) yield* store.insert(Docs, { id: `${prefix}-${i}`, title: "t", n: i })
    if (history !== null) yield* history.drain
    return N / ((performance.now() - start) / 1000)
  })

const asOfLatency = Effect.gen(function*() {
  const store = yield* Store.Store
  yield* store.insert(Docs, { id: "hot", title: "0", n: 0 })
  // Seed the versions directly (as the plugin would have recorded them), then time point-in-time reads.
  const records = Array.from({ length: VERSIONS }, (_, i) => ({
    id: `docs:hot:${String(i + 1).padStart(10, "0")}`,
    tableName: "docs",
    rowId: "hot",
    version: i + 1,
    op: "update" as const,
    data: { id: "hot", title: String(i), n: i },
    changedAt: 1_000_000 + i,
    tenantId: null,
    traceId: "bench",
    subjectId: null,
    procedure: null
  }))
  yield* store.insertMany(RowHistory, records)
  const samples: Array<number> = []
  for (let i = 0; i < 200; i++) {
    const at = 1_000_000 + Math.floor((i / 200) * VERSIONS)
    const start = performance.now()
    const row = yield* rowAsOf(store, "docs", "hot", null, at)
    samples.push(performance.now() - start)
    if (row === null) return yield* Effect.dieMessage("expected a version")
  }
  samples.sort((a, b) => a - b)
  return { p50: samples[100]!, p99: samples[197]! }
})

export const run = async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "fw-bench-history-"))
  const rows: Array<Record<string, string | number>> = []
  const measure = async (tier: string, client: () => Layer.Layer<SqlClient.SqlClient, unknown>) => {
    const run = (prefix: string, history: RowHistoryPlugin | null) =>
      Effect.runPromise(Effect.scoped(Effect.provide(inserts(prefix, history), stack(client(), history))))
    const off = await run("off", null)
    const sync = await run("sync", rowHistoryPlugin())
    const batched = await run("batched", rowHistoryPlugin({ mode: "batched" }))
    const latency = await Effect.runPromise(Effect.scoped(Effect.provide(asOfLatency, stack(client(), null))))
    rows.push({
      tier,
      "insert/s off": perSecond(off),
      "insert/s sync": perSecond(sync),
      "sync / off": Number((sync / off).toFixed(2)),
      "insert/s batched": perSecond(batched),
      "batched / off": Number((batched / off).toFixed(2)),
      "rowAsOf p50 ms (10k versions)": Number(latency.p50.toFixed(2)),
      "rowAsOf p99 ms": Number(latency.p99.toFixed(2))
    })
  }
  let n = 0
  await measure("sqlite (file)", () => SqliteClient.layer({ filename: path.join(dir, `h${n++}.db`) }))
  try {
    const dbs: Array<{ drop: () => Promise<void> }> = []
    const urls = await Promise.all([scratchDatabase("h"), scratchDatabase("h"), scratchDatabase("h"), scratchDatabase("h")])
    dbs.push(...urls)
    let i = 0
    await measure("postgresql", () => PgClient.layer({ url: Redacted.make(urls[i++]!.url) }))
    for (const db of dbs) await db.drop()
  } catch (error) {
    console.warn(`PostgreSQL not measured: ${String(error)}`)
  }
  table(`row history (${N} inserts each way, one per transaction)`, rows)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
