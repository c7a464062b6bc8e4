/**
 * Incremental aggregates against full refreshes, on SQLite (file) and PostgreSQL:
 *
 * 1. Per change: one update of a source row (the write and its maintenance in one transaction),
 *    with one aggregate on the table at a time: a `sum` grouped by 100 groups, and a `max` raised
 *    (direct) or whose extreme is lowered (a bounded rescan of one group); against a full refresh
 *    of the same aggregate (one GROUP BY over the table), at `FW_BENCH_AGG_ROWS` source rows
 *    (default 1,000,000). The peer for "maintenance alone" is the same update of the same table
 *    with no aggregate on it.
 * 2. Insert throughput into a table with one incremental aggregate against the same table without.
 */
import type { SqlClient } from "@effect/sql"
import { SqlClient as Sql } from "@effect/sql"
import { Context, Effect, Schema } from "effect"
import { loadavg } from "node:os"
import type { AggregateSchedulerShape } from "../../src/aggregates/index.js"
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

/** The 1-minute load average, for the report. */
const loadAverage = () => `load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`

const median = (xs: Array<number>) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const measure = (tier: Tier) =>
  Effect.scoped(Effect.gen(function*() {
    const ctx = yield* base(yield* client(tier), tables)
    const sqlCtx = ctx as Context.Context<SqlClient.SqlClient>
    const loadStart = performance.now()
    yield* Effect.provide(load(tier), sqlCtx)
    const loadMs = performance.now() - loadStart
    const store = Context.get(ctx, Store)
    /** Runs `f` with a scheduler of `aggregates` (their per-change maintenance attached to the source only meanwhile). */
    const withAggregates = <A, E>(aggregates: ReadonlyArray<typeof sumByGroup>, f: (s: AggregateSchedulerShape) => Effect.Effect<A, E>) =>
      Effect.scoped(Effect.gen(function*() {
        const s = yield* scheduler(tier, ctx, aggregates, tables)
        yield* s.booted
        return yield* f(s)
      }))

    // Full refresh of each aggregate: one GROUP BY over every source row, three times.
    const full = (s: AggregateSchedulerShape, name: string) =>
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
    const [fullSum, fullMax] = yield* withAggregates([sumByGroup, maxByGroup], (s) => Effect.all([full(s, "sumByGroup"), full(s, "maxByGroup")]))

    // Per change: update a row's x in its own transaction; `round` picks a different row set each time.
    const updates = (round: number, x: (i: number) => number) =>
      Effect.gen(function*() {
        const start = performance.now()
        for (let i = 0; i < changes; i++) yield* store.update(Source, `r${1 + ((i * 104729 + round * 7) % rows)}`, { x: x(i) })
        return (performance.now() - start) / changes
      })
    // The peer: the same updates of the same table with no aggregate on it (the write alone).
    const bare = yield* updates(0, (i) => 300_000 + i)
    const sumRaise = yield* withAggregates([sumByGroup], () => updates(1, (i) => 300_000 + i))
    // max: raising is direct; lowering those new maxima to 0 takes the extreme away, a rescan of the group each time.
    const [maxRaise, maxLower] = yield* withAggregates([maxByGroup], () =>
      Effect.all([updates(2, (i) => 400_000 + i), updates(2, () => 0)]))
    const bareAgain = yield* updates(3, (i) => 300_000 + i)

    // Insert throughput: `fed` (with an incremental sum) against `plain` (none), alternating rounds.
    const throughput = (t: typeof Plain | typeof Fed, prefix: string) =>
      Effect.gen(function*() {
        const start = performance.now()
        for (let i = 0; i < inserts; i++) yield* store.insert(t, { id: `${prefix}${i}`, g: `g${i % 100}`, x: i })
        return inserts / ((performance.now() - start) / 1000)
      })
    const [plain, fed] = yield* withAggregates([fedSum], () =>
      Effect.gen(function*() {
        const plainRates: Array<number> = []
        const fedRates: Array<number> = []
        for (let round = 0; round < 3; round++) {
          plainRates.push(yield* throughput(Plain, `p${round}-`))
          fedRates.push(yield* throughput(Fed, `f${round}-`))
        }
        return [median(plainRates), median(fedRates)] as const
      }))
    return { tier, loadMs, fullSum, fullMax, bare: (bare + bareAgain) / 2, sumRaise, maxRaise, maxLower, plain, fed }
  }))

export const run = async () => {
  const results: Array<Record<string, string | number>> = []
  const inserted: Array<Record<string, string | number>> = []
  for (const tier of ["sqlite", "pg"] as const) {
    const r = await Effect.runPromise(measure(tier))
    const alone = (perChange: number) => Math.max(0.001, perChange - r.bare)
    results.push({
      tier,
      "source rows": rows.toLocaleString("en-US"),
      "full refresh sum / max (ms)": `${r.fullSum.toFixed(0)} / ${r.fullMax.toFixed(0)}`,
      "update alone (ms)": r.bare.toFixed(3),
      "update + sum (ms)": r.sumRaise.toFixed(3),
      "update + max raise (ms)": r.maxRaise.toFixed(3),
      "update + max lower → rescan (ms)": r.maxLower.toFixed(3),
      "sum: full / change": `${Math.round(r.fullSum / r.sumRaise)}×`,
      "max: full / rescan change": `${Math.round(r.fullMax / r.maxLower)}×`,
      "sum: full / maintenance alone": `${Math.round(r.fullSum / alone(r.sumRaise))}×`,
      "max: full / maintenance alone (raise, rescan)": `${Math.round(r.fullMax / alone(r.maxRaise))}×, ${Math.round(r.fullMax / alone(r.maxLower))}×`
    })
    inserted.push({
      tier,
      "inserts/s without aggregate": perSecond(r.plain),
      "inserts/s with one incremental sum": perSecond(r.fed),
      ratio: (r.fed / r.plain).toFixed(2)
    })
    console.log(`${tier} done (${loadAverage()})`, JSON.stringify(results.at(-1)), JSON.stringify(inserted.at(-1)))
  }
  table(`Incremental aggregate: per change (write + maintenance, one aggregate) vs a full refresh (load ${loadAverage()})`, results)
  table(`Insert throughput with one incremental aggregate vs without (median of 3 rounds of ${inserts})`, inserted)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
