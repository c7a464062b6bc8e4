/**
 * Standing primitives: insert throughput on a table watched by three expectations, one experiment
 * and one budget, against the same inserts with none declared (no standing plugin), on memory,
 * SQLite (file) and PostgreSQL. A third peer, the standing plugin with nothing declared, separates
 * the framework's change-listener dispatch from the standing work. After a warm-up round per peer,
 * rounds alternate (medians of `BENCH_STANDING_ROUNDS`, default 5) so the shared box's noise hits
 * every peer; ratios are given in wall time and in process CPU time (steadier on a loaded box).
 * Aim: at least 0.7×. `BENCH_STANDING_N` sets the inserts per round (default 5,000).
 */
import { FetchHttpClient } from "@effect/platform"
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Redacted, Schema } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as PluginHost from "../../src/server/PluginHost.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import {
  CostEvents,
  defineCostBudget,
  defineExpectation,
  defineExperiment,
  ExpectationState,
  standingPlugin
} from "../../src/standing/index.js"
import { scratchDatabase } from "../pgDatabase.js"
import { perSecond, storeTier, table } from "../support.js"

const Orders = defineTable("orders", {
  fields: { tenantId: Schema.String, userId: Schema.String, amount: Schema.NullOr(Schema.Number), placedAt: Schema.Number },
  tenantField: "tenantId"
})
const N = Number(process.env.BENCH_STANDING_N ?? 5_000)
/** `BENCH_STANDING_TIERS` (comma-separated `memory`, `sqlite`, `pg`) limits the tiers measured (default all). */
/** Measured rounds per peer (medians), after one warm-up round each. */
const rounds = Number(process.env.BENCH_STANDING_ROUNDS ?? 5)
const tiers = new Set((process.env.BENCH_STANDING_TIERS ?? "memory,sqlite,pg").split(","))

const watched = standingPlugin({
  expectations: [
    defineExpectation({ name: "nulls", on: { table: Orders }, invariant: { kind: "nullRate", column: "amount", maxRate: 0.5 } }),
    defineExpectation({ name: "bounds", on: { table: Orders }, invariant: { kind: "valueBounds", column: "amount", min: 0, max: 1_000 } }),
    defineExpectation({ name: "fresh", on: { table: Orders }, invariant: { kind: "freshness", column: "placedAt", maxAgeMs: 3_600_000 } })
  ],
  experiments: [
    defineExperiment({
      name: "checkout",
      on: { table: Orders },
      subject: "userId",
      variants: [{ name: "a" }, { name: "b" }],
      metric: { kind: "sum", column: "amount" }
    })
  ],
  budgets: [defineCostBudget({ name: "tokens", unit: "tokens", limit: 1_000, window: "day" })]
})

const empty = standingPlugin({})

const stack = (client: Layer.Layer<SqlClient.SqlClient, unknown> | null, standing: "none" | "empty" | "watched") => {
  const tier = storeTier(client, [Orders, CostEvents, ExpectationState])
  const plugin = standing === "none" ? null : standing === "empty" ? empty : watched
  return (plugin !== null ? Layer.scopedDiscard(PluginHost.start(plugin)) : Layer.empty).pipe(
    Layer.provideMerge(tier),
    Layer.provide(FetchHttpClient.layer)
  )
}

/** One round: inserts per second of wall time and per second of this process's CPU time (less sensitive to a loaded box). */
const inserts = (prefix: string) =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    const start = performance.now()
    const cpu = process.cpuUsage()
    for (let i = 0; i < N; i++) {
      yield* store.insert(Orders, {
        id: `${prefix}-${i}`,
        tenantId: `t${i % 10}`,
        userId: `u${i % 500}`,
        amount: i % 11 === 0 ? null : i % 1_200,
        placedAt: Date.now()
      })
    }
    const used = process.cpuUsage(cpu)
    return { wall: N / ((performance.now() - start) / 1000), cpu: N / ((used.user + used.system) / 1e6) }
  })

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

export const run = async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "fw-bench-standing-"))
  const rows: Array<Record<string, string | number>> = []
  let round = 0
  const measure = async (tier: string, client: () => Layer.Layer<SqlClient.SqlClient, unknown> | null) => {
    const once = (standing: "none" | "empty" | "watched") =>
      Effect.runPromise(Effect.scoped(Effect.provide(inserts(`r${round++}`), stack(client(), standing))))
    const peers = ["none", "empty", "watched"] as const
    // One discarded round per peer warms the JIT, then rounds alternate so the box's noise hits every peer.
    for (const peer of peers) await once(peer)
    const runs: Record<(typeof peers)[number], Array<{ readonly wall: number; readonly cpu: number }>> = { none: [], empty: [], watched: [] }
    for (let i = 0; i < rounds; i++) for (const peer of peers) runs[peer].push(await once(peer))
    const of = (peer: (typeof peers)[number], clock: "wall" | "cpu") => median(runs[peer].map((run) => run[clock]))
    const ratio = (a: number, b: number) => Number((a / b).toFixed(2))
    rows.push({
      tier,
      inserts: N,
      "insert/s none": perSecond(of("none", "wall")),
      "insert/s watched": perSecond(of("watched", "wall")),
      "watched / none": ratio(of("watched", "wall"), of("none", "wall")),
      "watched / none (cpu)": ratio(of("watched", "cpu"), of("none", "cpu")),
      "empty / none (cpu)": ratio(of("empty", "cpu"), of("none", "cpu")),
      "watched / empty (cpu)": ratio(of("watched", "cpu"), of("empty", "cpu"))
    })
  }
  if (tiers.has("memory")) await measure("memory", () => null)
  let n = 0
  if (tiers.has("sqlite")) await measure("sqlite (file)", () => SqliteClient.layer({ filename: path.join(dir, `s${n++}.db`) }))
  if (tiers.has("pg")) try {
    const dbs: Array<{ readonly drop: () => Promise<void> }> = []
    await measure("postgresql", () => {
      const layer = Layer.unwrapEffect(Effect.promise(async () => {
        const db = await scratchDatabase("standing")
        dbs.push(db)
        return PgClient.layer({ url: Redacted.make(db.url) })
      }))
      return layer as Layer.Layer<SqlClient.SqlClient, unknown>
    })
    for (const db of dbs) await db.drop()
  } catch (error) {
    console.log(`PostgreSQL skipped: ${String(error)}`)
  }
  table("Standing primitives: insert throughput, watched vs none (aim ≥ 0.7×)", rows)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
