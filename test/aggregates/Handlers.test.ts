/**
 * `useAggregate(def)` inside procedure handlers (spec 4.2), on every tier: a served app's query
 * reads a scheduled aggregate (`read` with ordering and `where`, and `meta()`) and an incremental
 * one, called over HTTP as plain JSON (`POST /rpc/<tag>`); a mutation reads the incremental sum
 * its own insert just moved. The aggregates plugin offers the scheduler to every handler once its
 * `attach` layer runs; without it the read is a defect naming what to add.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import { aggregatesPlugin, defineAggregate, layerMemory, layerSql, useAggregate } from "../../src/aggregates/index.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"
import { appTables, base, Orders, tiers } from "./support.js"

if (Pg.serverUrl === null) console.warn(Pg.skipReason)

const perGroup = defineAggregate({
  name: "handlers_per_group",
  refresh: "1h",
  bootRefresh: "sync",
  output: Schema.Struct({ g: Schema.String, orders: Schema.Number }),
  build: ({ store }) =>
    Effect.map(store.find(Orders), (rows) => {
      const counts = new Map<string, number>()
      for (const row of rows) counts.set(row.g, (counts.get(row.g) ?? 0) + 1)
      return [...counts].map(([g, orders]) => ({ g, orders }))
    })
})

const totals = defineAggregate({
  name: "handlers_totals",
  output: Schema.Struct({ g: Schema.String, total: Schema.Number }),
  incremental: { source: "orders", op: "sum", column: "x", groupBy: ["g"], toRow: ({ group, value }) => ({ g: group.g as string, total: value ?? 0 }) }
})

const Count = Schema.Struct({ g: Schema.String, orders: Schema.Number })
const Total = Schema.Struct({ g: Schema.String, total: Schema.Number })

const report = query("orders.report", {
  input: Schema.Struct({ groups: Schema.optional(Schema.Array(Schema.String)) }),
  output: Schema.Struct({
    counts: Schema.Array(Count),
    meta: Schema.Struct({ rowCount: Schema.Number, refreshed: Schema.Boolean, lastError: Schema.NullOr(Schema.String) }),
    totals: Schema.Array(Total)
  }),
  handler: ({ groups }) =>
    Effect.gen(function*() {
      const counts = yield* useAggregate(perGroup).read({
        orderBy: "orders",
        direction: "desc",
        ...(groups === undefined ? {} : { where: { g: groups } })
      })
      const meta = yield* useAggregate(perGroup).meta()
      const sums = yield* useAggregate(totals).read({ orderBy: "g" })
      return { counts, meta: { rowCount: meta.rowCount, refreshed: meta.refreshedAt !== null, lastError: meta.lastError }, totals: sums }
    })
})

const add = mutation("orders.add", {
  input: Schema.Struct({ g: Schema.String, x: Schema.Number }),
  output: Schema.Array(Total),
  handler: ({ g, x }, { store }) =>
    Effect.gen(function*() {
      yield* store.insert(Orders, { g, h: false, x })
      return yield* useAggregate(totals).read({ where: { g } })
    })
})

const refresh = mutation("orders.refresh", {
  input: Schema.Struct({}),
  output: Schema.Struct({ outcome: Schema.String, rowCount: Schema.Number }),
  handler: () =>
    Effect.gen(function*() {
      const outcome = yield* useAggregate(perGroup).refresh()
      return { outcome, rowCount: (yield* useAggregate(perGroup).meta()).rowCount }
    })
})

const call = (url: string, tag: string, input: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/rpc/${tag}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(input)
    })
    return { status: response.status, body: await response.json() as unknown }
  })

describe("useAggregate in procedure handlers", () => {
  for (const tier of tiers) {
    it.scopedLive(`${tier.name}: read (ordered, filtered), meta and refresh answer over POST /rpc/<tag>`, () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const store = Layer.succeedContext(ctx)
        yield* Effect.gen(function*() {
          const orders = yield* Store.Store
          for (const [g, x] of [["a", 1], ["b", 2], ["b", 3], ["c", 4], ["c", 5], ["c", 6]] as const) {
            yield* orders.insert(Orders, { g, h: false, x })
          }
        }).pipe(Effect.provide(store))
        const inspect = aggregatesPlugin()
        const scheduler = tier.name === "memory"
          ? layerMemory([perGroup, totals], { tables: appTables })
          : layerSql([perGroup, totals], { tables: appTables })
        yield* Layer.build(inspect.attach.pipe(Layer.provide(scheduler), Layer.provide(store)))
        const app = defineApp({ name: `aggregate-handlers-${tier.name}`, tables: appTables, procedures: [report, add, refresh], plugins: [inspect.plugin] })
        const served = yield* Serve.serve(app, store)

        const first = yield* call(served.url, "orders.report", {})
        assert.deepStrictEqual(first, {
          status: 200,
          body: {
            counts: [{ g: "c", orders: 3 }, { g: "b", orders: 2 }, { g: "a", orders: 1 }],
            meta: { rowCount: 3, refreshed: true, lastError: null },
            totals: [{ g: "a", total: 1 }, { g: "b", total: 5 }, { g: "c", total: 15 }]
          }
        })
        const filtered = yield* call(served.url, "orders.report", { groups: ["a", "b"] })
        assert.deepStrictEqual((filtered.body as { counts: unknown }).counts, [{ g: "b", orders: 2 }, { g: "a", orders: 1 }])

        // A mutation reads the incremental sum its own insert moved.
        assert.deepStrictEqual(yield* call(served.url, "orders.add", { g: "d", x: 7 }), { status: 200, body: [{ g: "d", total: 7 }] })
        assert.deepStrictEqual(yield* call(served.url, "orders.add", { g: "a", x: 10 }), { status: 200, body: [{ g: "a", total: 11 }] })
        // The scheduled one follows on a refresh started from a handler.
        assert.deepStrictEqual(yield* call(served.url, "orders.refresh", {}), { status: 200, body: { outcome: "refreshed", rowCount: 4 } })
        const after = yield* call(served.url, "orders.report", {})
        const counts = (after.body as { counts: ReadonlyArray<{ g: string; orders: number }> }).counts
        // Ordered by the count, descending (a tie between a and b in either order).
        assert.deepStrictEqual(counts.map((row) => row.orders), [3, 2, 2, 1])
        assert.deepStrictEqual([...counts].sort((x, y) => x.g.localeCompare(y.g)), [
          { g: "a", orders: 2 },
          { g: "b", orders: 2 },
          { g: "c", orders: 3 },
          { g: "d", orders: 1 }
        ])
      }), 60_000)
  }

  it.effect("with no scheduler in the fiber at all, the handle's calls are defects naming what to provide", () =>
    Effect.gen(function*() {
      const calls: ReadonlyArray<Effect.Effect<unknown, unknown>> = [useAggregate(perGroup).read(), useAggregate(perGroup).meta(), useAggregate(perGroup).refresh()]
      for (const run of calls) {
        const exit = yield* Effect.exit(run)
        assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
        assert.include(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", "no AggregateScheduler in this fiber")
      }
    }))

  it.scopedLive("without the scheduler attached, the handler's read is a defect naming what to add (logged), answered 500", () =>
    Effect.gen(function*() {
      const ctx = yield* base(tiers[0]!)
      const inspect = aggregatesPlugin()
      const app = defineApp({ name: "aggregate-handlers-detached", tables: appTables, procedures: [report], plugins: [inspect.plugin] })
      const served = yield* Serve.serve(app, Layer.succeedContext(ctx))
      const answer = yield* call(served.url, "orders.report", {})
      assert.strictEqual(answer.status, 500)
      assert.strictEqual((answer.body as { _tag: string })._tag, "InternalError")
      assert.isTrue(served.logs.some((line) => line.includes("aggregates: the scheduler is not running")), served.logs.join("\n"))
    }))
})
