/**
 * The randomized incremental check shared by the test and the soak: one aggregate per op with and
 * without groupBy, a seeded sequence of inserts, updates (group moves included) and deletes, and a
 * comparison of every aggregate with a full recomputation.
 */
import { Effect, Schema } from "effect"
import type * as Aggregate from "../../src/aggregates/Aggregate.js"
import type { AggregateSchedulerShape } from "../../src/aggregates/AggregateScheduler.js"
import * as Incremental from "../../src/aggregates/Incremental.js"
import { defineAggregate } from "../../src/aggregates/index.js"
import type { StoreShape } from "../../src/kernel/store/Store.js"
import { appTables, Orders } from "./tables.js"

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

export type OrderRow = { readonly id: string; readonly g: string; readonly h: boolean; readonly x: number | null }

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
        throw new Error(`${aggregate.name} after ${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`)
      }
    }), { discard: true })
}


/**
 * A seeded random writer of `Orders` on `store`: each run of `step` makes one random change (ids
 * counted from `firstId`), and `mirror` holds the rows as they should now be.
 */
export const writer = (store: StoreShape, seed: number, firstId = 0) => {
  const next = random(seed)
  const mirror = new Map<string, OrderRow>()
  const counter = { n: firstId }
  return { mirror, step: Effect.suspend(() => step(store, mirror, next, counter)) }
}
