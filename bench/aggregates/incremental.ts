/**
 * Incremental aggregates against full refreshes, on SQLite (file) and PostgreSQL:
 *
 * 1. Per change: one update of a source row (the write and its maintenance in one transaction) of a
 *    `sum` grouped by 100 groups, and of a `max` whose extreme is lowered (a bounded rescan of one
 *    group), against a full refresh of the same aggregate (one GROUP BY over the table), at
 *    `FW_BENCH_AGG_ROWS` source rows (default 1,000,000).
 * 2. Insert throughput into a table with one incremental aggregate against the same table without.
 */
import type { SqlClient } from "@effect/sql"
import { SqlClient as Sql } from "@effect/sql"
import { Context, Effect, Schema } from "effect"
import { defineAggregate } from "../../src/aggregates/index.js"
import { Store } from "../../src/kernel/Store.js"
import { defineTable } from "../../src/kernel/Table.js"
import { perSecond, table } from "../support.js"
import { base, client, scheduler } from "./stack.js"
import type { Tier } from "./stack.js"

const rows = Number(process.env.FW_BENCH_AGG_ROWS ?? 1_000_000)
const changes = Number(process.env.FW_BENCH_AGG_CHANGES ?? 200)
const inserts = Number(process.env.FW_BENCH_AGG_INSERTS ?? 2_000)

const Source = defineTable("source", { fields: { g: Schema.String, x: Schema.Number }, indexes: [["g", "x"]] })
const Plain = defineTable("plain", { fields: { g: Schema.String, x: Schema.Number } })
const Fed = defineTable("fed", { fields: { g: Schema.String, x: Schema.Number } })
const tables = [Source, Plain, Fed]
const Out = Schema.Struct({ g: Schema.String, value: Schema.NullOr(Schema.Number) })
const toRow = ({ group, value }: { readonly group: Readonly<Record<string, unknown>>; readonly value: number | null }) => ({ g: group.g as string, value })

const sumByGroup = defineAggregate({ name: "sumByGroup", output: Out, incremental: { source: "source", op: "sum", column: "x", groupBy: ["g"], toRow } })
const maxByGroup = defineAggregate({ name: "maxByGroup", output: Out, incremental: { source: "source", op: "max", column: "x", groupBy: ["g"], toRow } })
const fedSum = defineAggregate({ name: "fedSum", output: Out, incremental: { source: "fed", op: "sum", column: "x", groupBy: ["g"], toRow } })

/** Loads the source in SQL (generate_series / a recursive CTE): far faster than row-by-row inserts. */
const load = (tier: Tier) =>
  Effect.gen(function*() {
    const sql = yield* Sql.SqlClient
    if (tier === "pg") {
      yield* sql.unsafe(`INSERT INTO source (id, g, x) SELECT 'r' || i, 'g' || (i % 100), (i::bigint * 7919) % 100000 FROM generate_series(1, ${rows}) AS i`)
      yield* sql.unsafe("ANALYZE source")
    } else {
      yield* sql.unsafe(`INSERT INTO source (id, g, x) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${rows})
        SELECT 'r' || i, 'g' || (i % 100), (i * 7919) % 100000 FROM s`)
      yield* sql.unsafe("ANALYZE")
    }
  })

const median = (xs: Array<number>) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const measure = (tier: Tier) =>
  Effect.scoped(Effect.gen(function*() {
    const ctx = yield* base(yield* client(tier), tables)
    const sqlCtx = ctx as Context.Context<SqlClient.SqlClient>
    const loadStart = performance.now()
    yield* Effect.provide(load(tier), sqlCtx)
    const loadMs = performance.now() - loadStart
    const s = yield* scheduler(tier, ctx, [sumByGroup, maxByGroup, fedSum], tables)
    yield* s.booted
    const store = Context.get(ctx, Store)

    // Full refresh of each aggregate: one GROUP BY over every source row, three times.
    const full = (name: string) =>
      Effect.gen(function*() {
        const times: Array<number> = []
        for (let i = 0; i < 3; i++) {
          const start = performance.now()
          const outcome = yield* s.refresh(name)
          if (outcome !== "refreshed") throw new Error(`${name}: ${outcome}`)
          times.push(performance.now() - start)
        }
        return median(times)
      })
    const fullSum = yield* full("sumByGroup")
    const fullMax = yield* full("maxByGroup")

    // Per change: update a random row's x (both aggregates maintained in the same transaction).
    const perChange = (patch: (i: number) => { readonly id: string; readonly x: number }) =>
      Effect.gen(function*() {
        const start = performance.now()
        for (let i = 0; i < changes; i++) {
          const { id, x } = patch(i)
          yield* store.update(Source, id, { x })
        }
        return (performance.now() - start) / changes
      })
    // The peer: the same update on a table no aggregate watches (the write alone).
    for (let i = 0; i < changes; i++) yield* store.insert(Plain, { id: `u${i}`, g: `g${i % 100}`, x: i })
    const bareStart = performance.now()
    for (let i = 0; i < changes; i++) yield* store.update(Plain, `u${i}`, { x: 200_000 + i })
    const bare = (performance.now() - bareStart) / changes
    const raise = yield* perChange((i) => ({ id: `r${1 + ((i * 104729) % rows)}`, x: 200_000 + i }))
    // Lowering those new maxima forces a rescan of the group for `max` each time.
    const lower = yield* perChange((i) => ({ id: `r${1 + ((i * 104729) % rows)}`, x: 0 }))

    // Insert throughput: `fed` (with an incremental sum) against `plain` (none), alternating rounds.
    const throughput = (t: typeof Plain | typeof Fed, prefix: string) =>
      Effect.gen(function*() {
        const start = performance.now()
        for (let i = 0; i < inserts; i++) yield* store.insert(t, { id: `${prefix}${i}`, g: `g${i % 100}`, x: i })
        return inserts / ((performance.now() - start) / 1000)
      })
    const plainRates: Array<number> = []
    const fedRates: Array<number> = []
    for (let round = 0; round < 3; round++) {
      plainRates.push(yield* throughput(Plain, `p${round}-`))
      fedRates.push(yield* throughput(Fed, `f${round}-`))
    }
    return { tier, loadMs, fullSum, fullMax, bare, raise, lower, plain: median(plainRates), fed: median(fedRates) }
  }))

export const run = async () => {
  const results: Array<Record<string, string | number>> = []
  const inserted: Array<Record<string, string | number>> = []
  for (const tier of ["sqlite", "pg"] as const) {
    const r = await Effect.runPromise(measure(tier))
    results.push({
      tier,
      "source rows": rows.toLocaleString("en-US"),
      "load (s)": (r.loadMs / 1000).toFixed(1),
      "full refresh sum (ms)": r.fullSum.toFixed(1),
      "full refresh max (ms)": r.fullMax.toFixed(1),
      "update alone (ms)": r.bare.toFixed(3),
      "per change, raise (ms)": r.raise.toFixed(3),
      "per change, lower max → rescan (ms)": r.lower.toFixed(3),
      "ratio sum (full / change)": `${Math.round(r.fullSum / r.raise)}×`,
      "ratio max (full / rescan change)": `${Math.round(r.fullMax / r.lower)}×`,
      "maintenance alone, raise (ms)": Math.max(0, r.raise - r.bare).toFixed(3),
      "ratio sum (full / maintenance alone)": `${Math.round(r.fullSum / Math.max(0.001, r.raise - r.bare))}×`
    })
    inserted.push({
      tier,
      "inserts/s without aggregate": perSecond(r.plain),
      "inserts/s with one incremental sum": perSecond(r.fed),
      ratio: (r.fed / r.plain).toFixed(2)
    })
    console.log(`${tier} done`, JSON.stringify(results.at(-1)), JSON.stringify(inserted.at(-1)))
  }
  table("Incremental aggregate: per change (write + maintenance, two aggregates) vs a full refresh (medians)", results)
  table(`Insert throughput with one incremental aggregate vs without (median of 3 rounds of ${inserts})`, inserted)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
