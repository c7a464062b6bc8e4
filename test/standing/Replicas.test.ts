/**
 * Replicas of the expectation engine that receive the same changes in different orders, as under
 * the fleet change scope (a replica hears its own writes at once and the others' later): several
 * engines over one store, each fed the changes in an order the test chooses. A state-row change
 * reaches the engine that wrote it at once (inline) and the others when the test delivers it.
 * However the orders differ, every engine ends on the same status, `since` and cause.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Engine from "../../src/standing/Engine.js"
import type * as Expectation from "../../src/standing/Expectation.js"
import { defineExpectation, ExpectationState } from "../../src/standing/index.js"
import { Orders, storeTier, tiers } from "./support.js"

const nulls = defineExpectation({ name: "nulls", on: { table: Orders }, invariant: { kind: "nullRate", column: "amount", maxRate: 0.25 } })
const bounds = defineExpectation({
  name: "bounds",
  on: { table: Orders },
  invariant: { kind: "valueBounds", column: "amount", min: 0, max: 100, maxViolationRate: 0.2 }
})
const volume = defineExpectation({ name: "volume", on: { table: Orders, where: (row) => row.status === "open" }, invariant: { kind: "rowCount", max: 6 } })

type OrderRow = { readonly id: string; readonly tenantId: string; readonly amount: number | null; readonly status: string; readonly placedAt: number }

let seq = 0
/** A committed change of `orders` made by hand, caused by trace `trace` at `at`. */
const change = (before: OrderRow | null, after: OrderRow | null, at: number, trace: string): ChangeEvent => ({
  table: Orders.name,
  op: before === null ? "insert" : after === null ? "delete" : "update",
  id: (after ?? before)!.id,
  tenantId: "acme",
  before,
  after,
  at,
  seq: ++seq,
  provenance: { traceId: trace, subjectId: null, procedure: "orders.write" }
})
const order = (id: string, amount: number | null, at: number, status = "open"): OrderRow => ({ id, tenantId: "acme", amount, status, placedAt: at })

/**
 * `count` engines over the store, booted one after the other. Each has an inbox of the changes
 * committed by the others (data and state rows, in commit order) that it has not heard yet.
 */
const replicas = (count: number, expectations: ReadonlyArray<Expectation.Any>) =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    const tap = yield* ChangeTap.ChangeTap
    const engines: Array<Engine.Engine> = []
    const inbox: Array<Array<ChangeEvent>> = []
    /** The engine whose effect runs now: a state row it writes reaches it inline. */
    let writer = -1
    yield* tap.subscribe({
      name: "replicas",
      inline: true,
      onEvent: (event) => {
        if (event.table !== ExpectationState.name) return Effect.void
        for (let i = 0; i < inbox.length; i++) if (i !== writer) inbox[i]!.push({ ...event, remote: true })
        return writer === -1 ? Effect.void : engines[writer]!.onChange(event)
      }
    })
    /** Runs an effect of engine `i` (its state writes are its own). */
    const run = <E>(i: number, effect: Effect.Effect<void, E>) =>
      Effect.suspend(() => {
        writer = i
        return effect
      }).pipe(Effect.ensuring(Effect.sync(() => writer = -1)))
    for (let i = 0; i < count; i++) {
      const engine = yield* Engine.make({ expectations, budgets: [], experiments: [] }, store)
      engines.push(engine)
      inbox.push([])
      yield* run(i, engine.boot)
    }
    /**
     * Engine `i` commits a write: it counts it now and hands back what it has left to run (its
     * state write, notifications); the others hear it later.
     */
    const commit = (i: number, event: ChangeEvent) => {
      for (let j = 0; j < count; j++) if (j !== i) inbox[j]!.push({ ...event, remote: true })
      return engines[i]!.onChange(event)
    }
    return {
      commit,
      /** Engine `i` makes a write and runs what it causes at once. */
      write: (i: number, event: ChangeEvent) => Effect.suspend(() => run(i, commit(i, event))),
      run,
      /** Engine `i` hears the next `n` changes of its inbox (all by default). */
      hear: (i: number, n = Infinity) =>
        Effect.suspend(() => Effect.forEach(inbox[i]!.splice(0, n), (event) => run(i, engines[i]!.onChange(event)), { discard: true })),
      pending: (i: number) => inbox[i]!.length,
      /** What engine `i` shows of each expectation, evaluation time left out (each engine's own). */
      observed: (i: number) =>
        Effect.map(engines[i]!.expectations.snapshot(), (all) => all.map(({ lastEvaluatedAt: _, ...rest }) => rest))
    }
  })

/** A deterministic pseudo-random sequence (a linear congruential generator). */
const random = (seed: number) => (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) % n

for (const tier of tiers) {
  describe(`expectation state across replicas: ${tier.name}`, () => {
    it.scoped("a flap one replica sees and the other does not: both end on the start of the recovery", () =>
      Effect.gen(function*() {
        const r = yield* replicas(2, [nulls])
        for (const row of [order("o1", 1, 1), order("o2", 2, 2)]) {
          yield* r.write(0, change(null, row, row.placedAt, `seed-${row.id}`))
          yield* r.hear(1)
        }
        const x = change(null, order("x", null, 10), 10, "trace-x") // 1 null of 3: violated
        const y = change(null, order("y", 3, 20), 20, "trace-y") // 1 null of 4 = 0.25: holding
        // Replica 0 sees x then y (violated, then recovered); replica 1 sees y then x (holding throughout).
        yield* r.write(0, x)
        yield* r.write(1, y)
        yield* r.hear(0)
        yield* r.hear(1)
        const [a, b] = [yield* r.observed(0), yield* r.observed(1)]
        assert.deepStrictEqual(b, a)
        assert.strictEqual(a[0]!.status, "holding")
        assert.strictEqual(a[0]!.since, 20)
        assert.strictEqual(a[0]!.lastCause?.traceId, "trace-y")
      }).pipe(Effect.provide(storeTier(tier.client()))))

    it.scoped("one replica's state writes finishing out of order keep its own latest start", () =>
      Effect.gen(function*() {
        const r = yield* replicas(1, [nulls])
        for (const row of [order("o1", 1, 1), order("o2", 2, 2)]) yield* r.write(0, change(null, row, row.placedAt, `seed-${row.id}`))
        // Two concurrent writers: both counted before either's state write runs, which then run in reverse.
        const violated = r.commit(0, change(null, order("x", null, 10), 10, "trace-x"))
        const recovered = r.commit(0, change(null, order("y", 3, 20), 20, "trace-y"))
        yield* r.run(0, recovered)
        yield* r.run(0, violated)
        const [shown] = yield* r.observed(0)
        assert.deepStrictEqual([shown!.status, shown!.since, shown!.lastCause?.traceId], ["holding", 20, "trace-y"])
        // The state row records the same start (a replica booting later takes it over).
        const recorded = yield* (yield* Store.Store).get(ExpectationState, "nulls")
        assert.deepStrictEqual(
          Option.map(recorded, (row) => [row.status, row.since, row.cause?.["traceId"]]),
          Option.some(["holding", 20, "trace-y"])
        )
      }).pipe(Effect.provide(storeTier(tier.client()))))
  })
}

describe("expectation state across replicas: random orders", () => {
  // Memory only: the orders are what varies, and each seed makes a few hundred state writes.
  for (let seed = 1; seed <= 40; seed++) {
    it.scoped(`seed ${seed}: three replicas agree on status, metric, since and cause`, () =>
      Effect.gen(function*() {
        const next = random(seed)
        const r = yield* replicas(3, [nulls, bounds, volume])
        // Each replica writes its own rows (so a row's changes keep their order everywhere).
        const rows = [new Map<string, OrderRow>(), new Map<string, OrderRow>(), new Map<string, OrderRow>()]
        const deferred: Array<Array<Effect.Effect<void>>> = [[], [], []]
        let at = 100
        for (let step = 0; step < 90; step++) {
          const i = next(3)
          const move = next(6)
          if (move < 3) {
            // A write by replica i: an insert, or an update or delete of one of its rows.
            at += 1 + next(3)
            const own = rows[i]!
            const existing = own.size === 0 || next(3) === 0 ? null : [...own.values()][next(own.size)]!
            const amount = [null, 5, 50, 500][next(4)]!
            const after = existing !== null && next(2) === 0
              ? null
              : order(existing?.id ?? `r${i}-${step}`, amount, at, next(3) === 0 ? "closed" : "open")
            const event = change(existing, after, at, `t${i}-${step}`)
            if (after === null) own.delete(existing!.id)
            else own.set(after.id, after)
            // Now and then counted with its state write held back: a concurrent writer's runs meanwhile.
            if (next(3) === 0) deferred[i]!.push(r.commit(i, event))
            else yield* r.write(i, event)
          } else if (move < 5) {
            yield* r.hear(i, 1 + next(4))
          } else if (deferred[i]!.length > 0) {
            yield* r.run(i, deferred[i]!.splice(next(deferred[i]!.length), 1)[0]!)
          }
        }
        // Quiet: every held state write runs, every change is heard.
        while (deferred.some((held) => held.length > 0) || [0, 1, 2].some((i) => r.pending(i) > 0)) {
          for (let i = 0; i < 3; i++) {
            for (const held of deferred[i]!.splice(0)) yield* r.run(i, held)
            yield* r.hear(i)
          }
        }
        const [a, b, c] = [yield* r.observed(0), yield* r.observed(1), yield* r.observed(2)]
        assert.deepStrictEqual(b, a)
        assert.deepStrictEqual(c, a)
      }).pipe(Effect.provide(storeTier(null))))
  }
})
