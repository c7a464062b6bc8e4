/**
 * Row history: insert throughput with the plugin on against off, on SQLite (file) and PostgreSQL,
 * and `rowAsOf` latency on a row with 10,000 versions.
 *
 * The three stacks (history off, `sync`, `batched`) run side by side, each on its own database,
 * in alternating batches of inserts (a loaded shared machine distorts sequential phases far
 * more); besides the rate it reports this process's CPU time per insert (PostgreSQL's own CPU is
 * not in it). A batched batch ends once its versions are recorded.
 * `BENCH_HISTORY_TIERS=pg` (a comma list of `sqlite`, `pg`) measures only those tiers.
 */
import { FetchHttpClient } from "@effect/platform"
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, ManagedRuntime, Redacted, Schema } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as PluginHost from "../src/server/PluginHost.js"
import { rowAsOf, rowHistoryPlugin, RowHistory } from "../src/history/index.js"
import type { RowHistoryPlugin } from "../src/history/index.js"
import * as ChangeTap from "../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../src/kernel/store/Store.js"
import { defineTable } from "../src/kernel/schema/Table.js"
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

/** Rounds of alternating batches, and inserts per batch. */
const ROUNDS = 10
const BATCH = N / ROUNDS

/** One batch of `BATCH` inserts; with batched history, it ends once every version is recorded. */
const batch = (prefix: string, history: RowHistoryPlugin | null) =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    for (let i = 0; i < BATCH; i++) yield* store.insert(Docs, { id: `${prefix}-${i}`, title: "t", n: i })
    if (history !== null) yield* history.drain
  })

interface Totals {
  wallMs: number
  cpuMs: number
}

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
    const modes = { off: null, sync: rowHistoryPlugin(), batched: rowHistoryPlugin({ mode: "batched" }) }
    const runtimes = Object.entries(modes).map(([name, history]) => ({
      name,
      history,
      runtime: ManagedRuntime.make(stack(client(), history))
    }))
    const totals: Record<string, Totals> = {}
    let round = 0
    const once = async (timed: boolean) => {
      for (const { history, name, runtime } of runtimes) {
        const cpu = process.cpuUsage()
        const start = performance.now()
        await runtime.runPromise(batch(`${name}-${round}`, history))
        const used = process.cpuUsage(cpu)
        if (!timed) continue
        const total = totals[name] ??= { wallMs: 0, cpuMs: 0 }
        total.wallMs += performance.now() - start
        total.cpuMs += (used.user + used.system) / 1000
      }
      round++
    }
    await once(false)
    for (let i = 0; i < ROUNDS; i++) await once(true)
    for (const { runtime } of runtimes) await runtime.dispose()
    const rate = (name: string) => N / (totals[name]!.wallMs / 1000)
    const cpu = (name: string) => totals[name]!.cpuMs * 1000 / N
    const latency = await Effect.runPromise(Effect.scoped(Effect.provide(asOfLatency, stack(client(), null))))
    rows.push({
      tier,
      "insert/s off": perSecond(rate("off")),
      "insert/s sync": perSecond(rate("sync")),
      "sync / off": Number((rate("sync") / rate("off")).toFixed(2)),
      "insert/s batched": perSecond(rate("batched")),
      "batched / off": Number((rate("batched") / rate("off")).toFixed(2)),
      "CPU µs off": Math.round(cpu("off")),
      "CPU µs sync": Math.round(cpu("sync")),
      "CPU µs batched": Math.round(cpu("batched")),
      "rowAsOf p50 ms (10k versions)": Number(latency.p50.toFixed(2)),
      "rowAsOf p99 ms": Number(latency.p99.toFixed(2))
    })
  }
  const tiers = new Set((process.env.BENCH_HISTORY_TIERS ?? "sqlite,pg").split(","))
  let n = 0
  if (tiers.has("sqlite")) await measure("sqlite (file)", () => SqliteClient.layer({ filename: path.join(dir, `h${n++}.db`) }))
  if (tiers.has("pg")) try {
    const dbs: Array<{ drop: () => Promise<void> }> = []
    const urls = await Promise.all([scratchDatabase("h"), scratchDatabase("h"), scratchDatabase("h"), scratchDatabase("h")])
    dbs.push(...urls)
    let i = 0
    await measure("postgresql", () => PgClient.layer({ url: Redacted.make(urls[i++]!.url) }))
    for (const db of dbs) await db.drop()
  } catch (error) {
    console.warn(`PostgreSQL not measured: ${String(error)}`)
  }
  table(`row history (${N} inserts each way, one per transaction, ${ROUNDS} alternating batches)`, rows)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
