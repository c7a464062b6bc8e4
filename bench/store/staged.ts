/**
 * One-row inserts on an SQLite file with stagers (work committed in the writing transaction), in
 * CPU time per insert, alternating batches in one process (the machine is shared):
 *
 * - no stager: the direct one-statement insert;
 * - the search plugin's pending-sync marker stager, and row history in `sync` mode, each as
 *   statements (`StageStatements`: the row, the stager's statements and COMMIT in one step on the
 *   better-sqlite3 handle) and as an effect (the same statements through the client's transaction,
 *   which is what every staged write paid before, and what a stager without statements still pays).
 *
 * Only the writer's work is here: the search listener (index writes, marker deletes) is not
 * started (its deletes are stood in for by emptying the marker table between batches, untimed);
 * `bench/search/insert.ts` measures the plugin end to end.
 *
 * `npx tsx bench/store/staged.ts`
 */
import { FetchHttpClient } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, ManagedRuntime, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { rowHistoryPlugin, RowHistory } from "../../src/history/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import type { PendingChange } from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as StageStatements from "../../src/kernel/store/StageStatements.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pending from "../../src/search/Pending.js"
import { SearchPending } from "../../src/search/tables.js"
import * as PluginHost from "../../src/server/PluginHost.js"
import { table } from "../support.js"

const Notes = defineTable("bench_staged_notes", { fields: { title: Schema.String, n: Schema.Number } })
const batch = Number(process.env.BENCH_STAGED_BATCH ?? 500)
const rounds = Number(process.env.BENCH_STAGED_ROUNDS ?? 12)

type Stage = "none" | "markers" | "history"

/** The stager of `stage` on the tap, as statements or (`asEffect`) as an effect only. */
const stager = (stage: Stage, asEffect: boolean): Layer.Layer<never, unknown, ChangeTap.ChangeTap | Store.Store> => {
  if (stage === "none") return Layer.empty
  if (stage === "history") {
    const plugin = rowHistoryPlugin()
    const statements = plugin.onStageStatements!
    // As an effect: the same statements, run through the store by a plugin that offers no statement form.
    const { onStageStatements: _, ...rest } = plugin
    const effectOnly = {
      ...rest,
      onStage: (changes: ReadonlyArray<PendingChange>) =>
        Effect.flatMap(Store.Store, (store) => StageStatements.run(store, () => statements(changes)))
    }
    return Layer.scopedDiscard(PluginHost.start(asEffect ? effectOnly : plugin)).pipe(Layer.provide(FetchHttpClient.layer))
  }
  const plan = Pending.stage(new Set([Notes.name]), new Map())
  return Layer.scopedDiscard(Effect.gen(function*() {
    const tap = yield* ChangeTap.ChangeTap
    const store = yield* Store.Store
    yield* tap.addStager({
      name: "markers",
      stage: (changes) => StageStatements.run(store, () => plan(changes)),
      ...(asEffect ? {} : { statements: plan })
    })
  }))
}

/** A runner of batches of inserts on a fresh SQLite file, answering CPU µs per insert. */
const writer = async (file: string, stage: Stage, asEffect: boolean) => {
  const base = Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([Notes, SearchPending, RowHistory])).pipe(
      Layer.provideMerge(SqliteClient.layer({ filename: file }))
    ))
  )
  const runtime = ManagedRuntime.make(Layer.merge(base, stager(stage, asEffect).pipe(Layer.provide(base))))
  let n = 0
  const write = Effect.gen(function*() {
    const store = yield* Store.Store
    for (let i = 0; i < batch; i++) yield* store.insert(Notes, { title: "t", n: n++ })
  })
  await runtime.runPromise(write)
  return {
    run: async () => {
      const start = process.cpuUsage()
      await runtime.runPromise(write)
      const used = process.cpuUsage(start)
      // The search listener deletes each marker once the index has the change: the table stays small.
      if (stage === "markers") await runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DELETE FROM _fw_search_pending`))
      return (used.user + used.system) / batch
    },
    dispose: () => runtime.dispose()
  }
}

export const run = async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "fw-bench-staged-"))
  try {
    const all = [
      ["no stager (direct insert)", "none", false],
      ["search markers, statements (one step)", "markers", false],
      ["search markers, effect (client transaction)", "markers", true],
      ["row history sync, statements (one step)", "history", false],
      ["row history sync, effect (client transaction)", "history", true]
    ] as const
    // `BENCH_STAGED_ONLY=1,3`: only those setups (say, under `node --cpu-prof`).
    const only = process.env.BENCH_STAGED_ONLY?.split(",").map(Number)
    const setups = (only === undefined ? all : all.filter((_, i) => only.includes(i)))
    const writers = await Promise.all(setups.map(([, stage, asEffect], i) => writer(path.join(dir, `s${i}.db`), stage, asEffect)))
    const samples: Array<Array<number>> = setups.map(() => [])
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < writers.length; i++) samples[i]!.push(await writers[i]!.run())
    }
    const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
    const base = median(samples[0]!) // the first setup shown
    table(`staged one-row inserts on an SQLite file: CPU µs per insert, median of ${rounds} alternating batches of ${batch}`, setups.map(([name], i) => {
      const us = median(samples[i]!)
      return { setup: name, "CPU µs/insert": us.toFixed(1), "inserts/s per CPU": Math.round(1e6 / us).toLocaleString("en-US"), "ratio to no stager": (base / us).toFixed(2) }
    }))
    for (const w of writers) await w.dispose()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
