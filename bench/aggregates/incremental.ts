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
 * 3. PostgreSQL: 8 concurrent writers updating their own rows, all in one group (one hot group row)
 *    against each in a group of its own, with the `sum` and without any aggregate (the peer).
 *
 * `FW_BENCH_AGG_TIERS` (default `sqlite,pg`) picks the tiers.
 */
import type { SqlClient } from "@effect/sql"
import { SqlClient as Sql } from "@effect/sql"
import { Context, Effect, Schema } from "effect"
import { loadavg } from "node:os"
import type { AggregateSchedulerShape } from "../../src/aggregates/index.js"
import { defineAggregate } from "../../src/aggregates/index.js"
import * as Triggers from "../../src/aggregates/Triggers.js"
import { Store } from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import { perSecond, table } from "../support.js"
import { base, client, scheduler } from "./stack.js"
import type { Tier } from "./stack.js"

const rows = Number(process.env.FW_BENCH_AGG_ROWS ?? 1_000_000)
const changes = Number(process.env.FW_BENCH_AGG_CHANGES ?? 200)
const inserts = Number(process.env.FW_BENCH_AGG_INSERTS ?? 2_000)
const writers = 8
const perWriter = Number(process.env.FW_BENCH_AGG_PER_WRITER ?? 100)
const tiers = (process.env.FW_BENCH_AGG_TIERS ?? "sqlite,pg").split(",") as ReadonlyArray<Tier>

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
      })).pipe(
        // The triggers outlive the scheduler (they are the aggregate's, in the database): drop them
        // so the next phase measures only its own aggregate.
        Effect.zipLeft(Effect.provide(Triggers.installAll([]), sqlCtx))
      )

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
    // The box is shared and loaded: the figure is the fastest batch of 10 (its mean), which is what
    // the work costs when the process is not waiting for a core.
    const updates = (round: number, x: (i: number) => number) =>
      Effect.gen(function*() {
        let best = Infinity
        for (let batch = 0; batch < changes / 10; batch++) {
          const start = performance.now()
          for (let j = 0; j < 10; j++) {
            const i = batch * 10 + j
            yield* store.update(Source, `r${1 + ((i * 104729 + round * 7) % rows)}`, { x: x(i) })
          }
          best = Math.min(best, (performance.now() - start) / 10)
        }
        return best
      })
    /**
     * In the engine, without the app's per-statement overhead: one UPDATE of 200 spread rows (each
     * firing the aggregate's trigger once), rolled back; the fastest of 5, per row.
     */
    const engineMs = (x: string, persistFirst = false) =>
      Effect.provide(Effect.gen(function*() {
        const sql = yield* Sql.SqlClient
        const ids = Array.from({ length: 200 }, (_, i) => `'r${1 + ((i * 7_919 + 13) % rows)}'`).join(", ")
        const text = `UPDATE source SET x = ${x} WHERE id IN (${ids})`
        if (persistFirst) yield* sql.unsafe(`UPDATE source SET x = 900000 + x WHERE id IN (${ids})`)
        let best = Infinity
        for (let i = 0; i < 5; i++) {
          yield* sql.withTransaction(Effect.gen(function*() {
            const start = performance.now()
            yield* sql.unsafe(text)
            best = Math.min(best, (performance.now() - start) / 200)
            return yield* Effect.fail("rollback" as const)
          })).pipe(Effect.catchIf((e): e is "rollback" => e === "rollback", () => Effect.void))
        }
        return best
      }), sqlCtx)
    /** PostgreSQL: the time its executor spent in the aggregate's trigger per update (EXPLAIN ANALYZE, median of 30, rolled back). */
    const triggerMs = (x: (i: number) => number, round: number) =>
      tier !== "pg" ? Effect.succeed(null) : Effect.provide(Effect.gen(function*() {
        const sql = yield* Sql.SqlClient
        const times: Array<number> = []
        for (let i = 0; i < 30; i++) {
          const id = `r${1 + ((i * 104729 + round * 7) % rows)}`
          const [plan] = yield* sql.unsafe<Record<string, unknown>>(`EXPLAIN (ANALYZE, FORMAT JSON) UPDATE source SET x = ${x(i)} WHERE id = '${id}'`)
          const [report] = (plan!["QUERY PLAN"] ?? Object.values(plan!)[0]) as ReadonlyArray<{ readonly Triggers?: ReadonlyArray<{ readonly Time: number }> }>
          times.push((report?.Triggers ?? []).reduce((sum, t) => sum + t.Time, 0))
        }
        return median(times)
      }), sqlCtx)
    const engineBare = yield* engineMs("x + 1")
    const engineSum = yield* withAggregates([sumByGroup], () => engineMs("x + 1"))
    const [engineRaise, engineLower] = yield* withAggregates([maxByGroup], () =>
      Effect.all([engineMs("2000000 + x"), engineMs("0", true)]))
    // The peer: the same updates of the same table with no aggregate on it (the write alone).
    const bare = yield* updates(0, (i) => 300_000 + i)
    const [sumRaise, sumTrigger] = yield* withAggregates([sumByGroup], () =>
      Effect.all([updates(1, (i) => 300_000 + i), triggerMs((i) => 350_000 + i, 1)]))
    // max: raising is direct; lowering those new maxima to 0 takes the extreme away, a rescan of the group each time.
    const [maxRaise, maxLower, maxRaiseTrigger, maxLowerTrigger] = yield* withAggregates([maxByGroup], () =>
      Effect.all([updates(2, (i) => 400_000 + i), updates(2, () => 0), triggerMs((i) => 500_000 + i, 4), triggerMs(() => 0, 4)]))
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
    /**
     * 8 writers at once, each updating `perWriter` rows of its own, one at a time: `hot` puts every
     * row in group g0 (row ids ≡ 0 mod 100), else writer w's rows are all in group g<w>. Writes/s of
     * the whole burst, best of 3 rounds.
     */
    const concurrent = (hot: boolean, round: number) =>
      Effect.gen(function*() {
        let best = 0
        for (let r = 0; r < 3; r++) {
          const start = performance.now()
          yield* Effect.forEach(Array.from({ length: writers }, (_, w) => w), (w) =>
            Effect.gen(function*() {
              for (let j = 0; j < perWriter; j++) {
                const i = 100 * (1 + w * perWriter + j) + (hot ? 0 : w)
                yield* store.update(Source, `r${i}`, { x: 600_000 + round * 10 + r + j })
              }
            }), { concurrency: "unbounded", discard: true })
          best = Math.max(best, (writers * perWriter) / ((performance.now() - start) / 1000))
        }
        return best
      })
    const contention = tier !== "pg" ? null : yield* Effect.gen(function*() {
      const bareSpread = yield* concurrent(false, 0)
      const bareHot = yield* concurrent(true, 1)
      const [sumSpread, sumHot] = yield* withAggregates([sumByGroup], () => Effect.all([concurrent(false, 2), concurrent(true, 3)]))
      return { bareSpread, bareHot, sumSpread, sumHot }
    })
    return { tier, contention, loadMs, fullSum, fullMax, bare: Math.min(bare, bareAgain), sumRaise, maxRaise, maxLower, plain, fed, sumTrigger, maxRaiseTrigger, maxLowerTrigger, engineBare, engineSum, engineRaise, engineLower }
  }))

export const run = async () => {
  const results: Array<Record<string, string | number>> = []
  const inserted: Array<Record<string, string | number>> = []
  const triggers: Array<Record<string, string | number>> = []
  const engine: Array<Record<string, string | number>> = []
  const contention: Array<Record<string, string | number>> = []
  for (const tier of tiers) {
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
    engine.push({
      tier,
      "row update alone (ms)": r.engineBare.toFixed(4),
      "+ sum (ms)": r.engineSum.toFixed(4),
      "+ max raise / lower (ms)": `${r.engineRaise.toFixed(4)} / ${r.engineLower.toFixed(4)}`,
      "sum: full / (update + maintenance)": `${Math.round(r.fullSum / r.engineSum)}×`,
      "sum: full / maintenance": `${Math.round(r.fullSum / Math.max(0.0001, r.engineSum - r.engineBare))}×`,
      "max: full / (update + maintenance), raise / lower": `${Math.round(r.fullMax / r.engineRaise)}× / ${Math.round(r.fullMax / r.engineLower)}×`
    })
    if (r.sumTrigger !== null && r.maxRaiseTrigger !== null && r.maxLowerTrigger !== null) {
      triggers.push({
        tier,
        "sum trigger (ms)": r.sumTrigger.toFixed(3),
        "max trigger, raise / lower → rescan (ms)": `${r.maxRaiseTrigger.toFixed(3)} / ${r.maxLowerTrigger.toFixed(3)}`,
        "sum: full / trigger": `${Math.round(r.fullSum / r.sumTrigger)}×`,
        "max: full / trigger (raise, rescan)": `${Math.round(r.fullMax / r.maxRaiseTrigger)}×, ${Math.round(r.fullMax / r.maxLowerTrigger)}×`
      })
    }
    inserted.push({
      tier,
      "inserts/s without aggregate": perSecond(r.plain),
      "inserts/s with one incremental sum": perSecond(r.fed),
      ratio: (r.fed / r.plain).toFixed(2)
    })
    if (r.contention !== null) {
      const c = r.contention
      contention.push({
        tier,
        "no aggregate: 8 groups / 1 group (writes/s)": `${perSecond(c.bareSpread)} / ${perSecond(c.bareHot)}`,
        "sum: 8 groups / 1 group (writes/s)": `${perSecond(c.sumSpread)} / ${perSecond(c.sumHot)}`,
        "sum vs none, 8 groups": (c.sumSpread / c.bareSpread).toFixed(2),
        "sum vs none, 1 hot group": (c.sumHot / c.bareHot).toFixed(2),
        "sum: 1 hot group / 8 groups": (c.sumHot / c.sumSpread).toFixed(2)
      })
    }
    console.log(`${tier} done (${loadAverage()})`, JSON.stringify(results.at(-1)), JSON.stringify(inserted.at(-1)))
  }
  table(`Incremental aggregate: per change (write + maintenance, one aggregate) vs a full refresh (load ${loadAverage()})`, results)
  table("In the engine: per row of one 200-row UPDATE (its trigger included), fastest of 5, against a full refresh", engine)
  table("PostgreSQL: time in the aggregate's trigger per update (EXPLAIN ANALYZE, median of 30)", triggers)
  table(`${writers} concurrent writers, ${perWriter} updates each of their own rows: all in one group or each in its own (best of 3)`, contention)
  table(`Insert throughput with one incremental aggregate vs without (median of 3 rounds of ${inserts})`, inserted)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
