/**
 * Insert throughput through a procedure (the procedure runtime, memory store) with the search
 * plugin on (memory backend) against the same app without it, measured in the same run.
 * Aim: at least 0.7× the throughput without the plugin. `BENCH_SEARCH_INSERTS` sets the count;
 * `BENCH_SEARCH_STORE=sqlite` runs the app on an SQLite file instead, `BENCH_SEARCH_STORE=pg` on a
 * scratch PostgreSQL database per run (`FW_TEST_PG_URL`); on both each write also stages its
 * pending-sync marker in its transaction, and the listener clears it once indexed.
 *
 * The search listener runs off the writer's path, so two figures: the writers' own throughput
 * (what a caller waits for), and the throughput until the index has caught up with every insert
 * (`ChangeTap.settled` inside the timed section: the whole work, on one thread).
 */
import { FetchHttpClient, Headers } from "@effect/platform"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Redacted, Schema } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { defineApp } from "../../src/app/App.js"
import * as PluginHost from "../../src/server/PluginHost.js"
import * as Procedure from "../../src/app/Procedure.js"
import * as Runtime from "../../src/app/Runtime.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import { searchIndex, searchPlugin, searchTables } from "../../src/search/index.js"
import { scratchDatabase } from "../pgDatabase.js"
import { perSecond, storeTier, table } from "../support.js"

const N = Number(process.env.BENCH_SEARCH_INSERTS ?? 20_000)
const tier = process.env.BENCH_SEARCH_STORE === "sqlite" ? "sqlite" : process.env.BENCH_SEARCH_STORE === "pg" ? "pg" : "memory"
const onSqlite = tier === "sqlite"
const dir = onSqlite ? mkdtempSync(path.join(tmpdir(), "fw-bench-search-insert-")) : ""
let files = 0
const Notes = defineTable("notes", {
  fields: { tenantId: Schema.String, title: Schema.String, body: Schema.String },
  tenantField: "tenantId"
})
const add = Procedure.mutation("notes.add", {
  input: Schema.Struct({ title: Schema.String, body: Schema.String }),
  output: Schema.String,
  handler: (input, ctx) => Effect.map(ctx.store.insert(Notes, { tenantId: ctx.subject.tenantId!, ...input }), (row) => row.id)
})
const words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split(" ")
const subject = Subject.make({ type: "user", id: "u", tenantId: "t1" })

const measure = (withSearch: boolean, pgUrl?: string) => {
  const plugins = withSearch
    ? [searchPlugin({
      indexes: { notes: searchIndex(Notes, { index: "notes", tenantField: "tenantId", map: (row) => ({ ...row }) }) },
      sync: { resyncIntervalMs: 0 }
    })]
    : []
  const app = defineApp({ tables: [Notes], procedures: [add], plugins })
  const stack = Layer.mergeAll(Runtime.layer(app), ...plugins.map((plugin) => Layer.scopedDiscard(PluginHost.start(plugin)))).pipe(
    Layer.provideMerge(storeTier(
      pgUrl !== undefined
        ? PgClient.layer({ url: Redacted.make(pgUrl) })
        : onSqlite
        ? SqliteClient.layer({ filename: path.join(dir, `run${files++}.db`) })
        : null,
      [Notes, ...searchTables]
    )),
    Layer.provide(FetchHttpClient.layer)
  )
  return Effect.gen(function*() {
    const runtime = yield* Runtime.Runtime
    const call = (i: number) =>
      runtime.call(add, {
        input: { title: `${words[i % words.length]} ${words[(i * 7) % words.length]} ${i}`, body: `${words[(i * 3) % words.length]} note ${i}` },
        headers: Headers.empty,
        subject
      })
    const tap = yield* ChangeTap.ChangeTap
    for (let i = 0; i < 500; i++) yield* call(i)
    // The index catches up after the tap settles: its lanes send their batches after.
    const caughtUpAll = Effect.zipRight(tap.settled, Effect.forEach(plugins, (plugin) => plugin.settled, { discard: true }))
    yield* caughtUpAll
    const cpu = process.cpuUsage()
    const start = performance.now()
    for (let i = 0; i < N; i++) yield* call(i)
    const written = performance.now()
    yield* caughtUpAll
    const caughtUp = performance.now()
    const used = process.cpuUsage(cpu)
    return { writers: N / ((written - start) / 1000), settled: N / ((caughtUp - start) / 1000), cpuUs: (used.user + used.system) / N }
  }).pipe(Effect.provide(stack), Effect.scoped)
}

/** One measurement, on a scratch database of its own on PostgreSQL (dropped after). */
const once = async (withSearch: boolean) => {
  if (tier !== "pg") return Effect.runPromise(measure(withSearch))
  const database = await scratchDatabase("search_insert")
  try {
    return await Effect.runPromise(measure(withSearch, database.url))
  } finally {
    await database.drop()
  }
}

export const run = async () => {
  const off = await once(false)
  const on = await once(true)
  const off2 = await once(false)
  const on2 = await once(true)
  const offBest = Math.max(off.settled, off2.settled)
  // CPU time per insert until the index has it (writer and listener): steadier than throughput on a shared machine.
  const offCpu = Math.min(off.cpuUs, off2.cpuUs)
  const onCpu = Math.min(on.cpuUs, on2.cpuUs)
  const onWriters = Math.max(on.writers, on2.writers)
  const onSettled = Math.max(on.settled, on2.settled)
  table(`search: inserts through a procedure (${tier === "sqlite" ? "SQLite file" : tier === "pg" ? "PostgreSQL" : "memory"} store), ${N.toLocaleString("en-US")} per run, best of two`, [
    { setup: "search plugin off", "inserts/s": perSecond(offBest) },
    { setup: "search plugin on: writers (index catching up behind)", "inserts/s": perSecond(onWriters) },
    { setup: "search plugin on: until the index has every insert", "inserts/s": perSecond(onSettled) },
    { setup: "ratio on/off, writers (aim ≥ 0.7)", "inserts/s": (onWriters / offBest).toFixed(2) },
    { setup: "ratio on/off, until indexed", "inserts/s": (onSettled / offBest).toFixed(2) },
    { setup: "CPU µs per insert, off (best of two)", "inserts/s": offCpu.toFixed(0) },
    { setup: "CPU µs per insert, on, until indexed (best of two)", "inserts/s": onCpu.toFixed(0) },
    { setup: "ratio on/off, CPU per insert", "inserts/s": (offCpu / onCpu).toFixed(2) }
  ])
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
