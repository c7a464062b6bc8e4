/**
 * Incremental aggregates (spec 3.7): a seeded random sequence of inserts, updates (group moves
 * included) and deletes, checked after every step against a full recomputation, for every op with
 * and without groupBy, on every tier. PostgreSQL: concurrent writers on one group stay exact.
 * The full 10,000-step run is `bench/aggregates/soak.ts`.
 */
import type { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Schema, Scope } from "effect"
import type * as Aggregate from "../../src/aggregates/Aggregate.js"
import { defineAggregate } from "../../src/aggregates/index.js"
import type { AggregateSchedulerShape } from "../../src/aggregates/AggregateScheduler.js"
import * as Incremental from "../../src/aggregates/Incremental.js"
import type * as ChangeTap from "../../src/kernel/ChangeTap.js"
import { Store } from "../../src/kernel/Store.js"
import type { StoreShape } from "../../src/kernel/Store.js"
import * as Pg from "../support/Pg.js"
import { appTables, base, Orders, scheduler, tiers } from "./support.js"

const Out = Schema.Struct({ g: Schema.String, h: Schema.Boolean, value: Schema.NullOr(Schema.Number) })
const ops = ["count", "sum", "avg", "min", "max"] as const

/** One aggregate per op, with and without groupBy. */
export const incrementalAggregates = (): ReadonlyArray<Aggregate.Any> =>
  ops.flatMap((op) =>
    [false, true].map((grouped) =>
      defineAggregate({
        name: `${op}_${grouped ? "grouped" : "all"}`,
        output: Out,
        incremental: {
          source: "orders",
          op,
          ...(op === "count" ? {} : { column: "x" }),
          ...(grouped ? { groupBy: ["g", "h"] } : {}),
          toRow: ({ group, value }) => ({ g: (group.g as string | undefined) ?? "", h: (group.h as boolean | undefined) ?? false, value })
        }
      })
    )
  )

/** A small seeded PRNG (mulberry32). */
export const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

type OrderRow = { readonly id: string; readonly g: string; readonly h: boolean; readonly x: number | null }

/** One random step against the store and the mirror. */
export const step = (store: StoreShape, mirror: Map<string, OrderRow>, next: () => number, counter: { n: number }) => {
  const pick = <A>(xs: ReadonlyArray<A>) => xs[Math.floor(next() * xs.length)]!
  const value = () => next() < 0.15 ? null : Math.floor(next() * 21) - 5
  const ids = [...mirror.keys()]
  const roll = next()
  if (ids.length === 0 || roll < 0.4) {
    const row: OrderRow = { id: `o${counter.n++}`, g: pick(["a", "b", "c"]), h: next() < 0.5, x: value() }
    mirror.set(row.id, row)
    return Effect.asVoid(store.insert(Orders, row))
  }
  const id = pick(ids)
  if (roll < 0.75) {
    const patch: { g?: string; h?: boolean; x?: number | null } = {}
    if (next() < 0.4) patch.g = pick(["a", "b", "c"])
    if (next() < 0.3) patch.h = next() < 0.5
    if (next() < 0.8) patch.x = value()
    mirror.set(id, { ...mirror.get(id)!, ...patch })
    return Effect.asVoid(store.update(Orders, id, patch))
  }
  mirror.delete(id)
  return store.delete(Orders, id)
}

const key = (row: unknown) => JSON.stringify(row)

/** Compares every aggregate with a recomputation over `rows`. */
export const check = (s: AggregateSchedulerShape, aggregates: ReadonlyArray<Aggregate.Any>, source: Iterable<OrderRow>, at: string) => {
  const rows = [...source]
  return Effect.forEach(aggregates, (aggregate) =>
    Effect.gen(function*() {
      const shape = Incremental.resolve(aggregate, appTables)
      const expected = Incremental.visible(shape, Incremental.fold(shape, rows))
        .map((g) => aggregate.incremental!.toRow({ group: g.group, value: Incremental.valueOfGroup(shape.op, g) }))
        .map(key).sort()
      const actual = (yield* s.read(aggregate.name)).map(key).sort()
      if (JSON.stringify(actual) !== JSON.stringify(expected)) {
        assert.fail(`${aggregate.name} after ${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`)
      }
    }), { discard: true })
}

/** Steps per tier here (every op and both shapes run on each step); the soak runs 10,000 per tier. */
const steps = { memory: 1_000, sqlite: 300, pg: 120 } as const

for (const tier of tiers) {
  describe(`incremental aggregates: ${tier.name}`, () => {
    it.scoped(`random inserts, updates (group moves) and deletes match a full recomputation after each of ${steps[tier.name]} steps, for every op with and without groupBy`, () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const store = Context.get(ctx, Store)
        const next = random(42)
        const mirror = new Map<string, OrderRow>()
        const counter = { n: 0 }
        // Rows written before boot are picked up by the first build.
        for (let i = 0; i < 30; i++) yield* step(store, mirror, next, counter)
        const aggregates = incrementalAggregates()
        const s = yield* scheduler(tier.name, ctx, aggregates)
        yield* s.booted
        yield* check(s, aggregates, mirror.values(), "boot")
        for (let i = 0; i < steps[tier.name]; i++) {
          yield* step(store, mirror, next, counter)
          yield* check(s, aggregates, mirror.values(), `step ${i}`)
        }
        // A transaction that rolls back leaves every aggregate untouched.
        const failed = yield* Effect.exit(store.transaction(Effect.zipRight(
          store.insert(Orders, { id: "rolled-back", g: "a", h: true, x: -100 }),
          Effect.fail("abort")
        )))
        assert.isTrue(Exit.isFailure(failed))
        yield* check(s, aggregates, mirror.values(), "a rollback")
        const meta = yield* s.meta("count_grouped")
        assert.strictEqual(meta.lastError, null)
      }), 60_000)

    it.scoped("restart: a persistent incremental aggregate keeps its state (no rebuild); async rebuilds from the source", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const store = Context.get(ctx, Store)
        const next = random(7)
        const mirror = new Map<string, OrderRow>()
        const counter = { n: 0 }
        const aggregates = incrementalAggregates()
        const first = yield* Scope.make()
        const s1 = yield* scheduler(tier.name, ctx, aggregates, first)
        yield* s1.booted
        for (let i = 0; i < 25; i++) yield* step(store, mirror, next, counter)
        yield* Scope.close(first, Exit.void)
        const s2 = yield* scheduler(tier.name, ctx, aggregates)
        yield* s2.booted
        if (tier.name !== "memory") yield* check(s2, aggregates, mirror.values(), "restart")
        assert.strictEqual(yield* s2.refresh("min_grouped"), "refreshed")
        for (let i = 0; i < 25; i++) yield* step(store, mirror, next, counter)
        yield* check(s2, aggregates, mirror.values(), "after restart")
      }))
  })
}

if (Pg.serverUrl !== null) {
  describe("incremental aggregates: postgresql, concurrent writers", () => {
    it.scoped("eight writers on the same groups: no lost update, extremes exact", () =>
      Effect.gen(function*() {
        const ctx = yield* base({ name: "pg", client: () => Pg.layerFreshClient })
        const store = Context.get(ctx, Store)
        const aggregates = incrementalAggregates()
        const s = yield* scheduler("pg", ctx as Context.Context<Store | ChangeTap.ChangeTap | SqlClient.SqlClient>, aggregates)
        yield* s.booted
        // Eight writers with their own ids (o<1000w+n>), on the same six groups.
        yield* Effect.forEach([0, 1, 2, 3, 4, 5, 6, 7], (w) =>
          Effect.gen(function*() {
            const next = random(100 + w)
            const mine = new Map<string, OrderRow>()
            const counter = { n: 1000 * w }
            for (let i = 0; i < 15; i++) yield* step(store, mine, next, counter)
          }), { concurrency: "unbounded", discard: true })
        const rows = (yield* store.find(Orders)) as ReadonlyArray<OrderRow>
        assert.isAbove(rows.length, 0)
        yield* check(s, aggregates, rows, "concurrent writers")
      }))
  })
}
