import { assert, describe, it } from "@effect/vitest"
import { Effect, Ref, TestClock } from "effect"
import * as Provenance from "../../src/kernel/changes/Provenance.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Expectation from "../../src/standing/Expectation.js"
import {
  defineExpectation,
  ExpectationRegistry,
  type ExpectationTransition,
  StandingDefinitionError,
  standingPlugin,
  useExpectation
} from "../../src/standing/index.js"
import * as Pg from "../support/Pg.js"
import { type Client, Orders, sqliteFile, stack, tiers } from "./support.js"

const nulls = defineExpectation({ name: "amount-nulls", on: { table: Orders }, invariant: { kind: "nullRate", column: "amount", maxRate: 0.25 } })
const bounds = defineExpectation({
  name: "amount-bounds",
  on: { table: Orders },
  invariant: { kind: "valueBounds", column: "amount", min: 0, max: 100 },
  severity: "critical"
})
const volume = defineExpectation({ name: "volume", on: { table: Orders }, invariant: { kind: "rowCount", max: 3 } })
const fresh = defineExpectation({ name: "fresh", on: { table: Orders }, invariant: { kind: "freshness", column: "placedAt", maxAgeMs: 60_000 } })
const openOnes = defineExpectation({
  name: "open-orders",
  on: { table: Orders, where: (row) => row.status === "open" },
  invariant: { kind: "rowCount", max: 1 }
})

const plugin = standingPlugin({ expectations: [nulls, bounds, volume, fresh, openOnes] })

const as = (n: number) => Provenance.withProvenance({ traceId: `trace-${n}`, subjectId: `user-${n}`, procedure: "orders.write" })

const order = (id: string, amount: number | null, status = "open", placedAt: number | null = 0) => ({ id, tenantId: "acme", amount, status, placedAt })

/** Subscribes and returns a reader of the transitions seen so far, as `name:transition:traceId`. */
const record = Effect.gen(function*() {
  const registry = yield* ExpectationRegistry
  const seen = yield* Ref.make<ReadonlyArray<ExpectationTransition>>([])
  yield* registry.subscribe((transition) => Ref.update(seen, (all) => [...all, transition]))
  return Effect.map(Ref.getAndSet(seen, []), (all) => all.map((t) => `${t.name}:${t.transition}:${t.cause?.traceId ?? "null"}`))
})

const statusOf = (name: string) =>
  Effect.flatMap(ExpectationRegistry, (registry) => Effect.map(registry.get(name), (observed) => observed?.status ?? "unregistered"))

describe("defineExpectation", () => {
  it("refuses unknown columns, bad rates and missing bounds", () => {
    assert.throws(() => defineExpectation({ name: "x", on: { table: Orders }, invariant: { kind: "nullRate", column: "nope", maxRate: 0.1 } }), StandingDefinitionError)
    assert.throws(() => defineExpectation({ name: "x", on: { table: Orders }, invariant: { kind: "nullRate", column: "amount", maxRate: 2 } }), /maxRate/)
    assert.throws(() => defineExpectation({ name: "x", on: { table: Orders }, invariant: { kind: "rowCount" } }), /min, max or both/)
    assert.throws(() => defineExpectation({ name: "x", on: { table: Orders }, invariant: { kind: "valueBounds", column: "amount", min: 5, max: 1 } }), /above/)
    assert.throws(() => defineExpectation({ name: "x", on: { table: Orders }, invariant: { kind: "freshness", column: "placedAt", maxAgeMs: 0 } }), /maxAgeMs/)
    assert.throws(() => standingPlugin({ expectations: [nulls, nulls] }), /declared twice/)
  })

  it("counters match a recount of the rows after every insert, update and delete (seeded random writes)", () => {
    const bounded = defineExpectation({ name: "b", on: { table: Orders }, invariant: { kind: "valueBounds", column: "amount", min: 10, max: 50, maxViolationRate: 0.2 } })
    const where = defineExpectation({ name: "w", on: { table: Orders, where: (row) => row.status === "open" }, invariant: { kind: "freshness", column: "placedAt", maxAgeMs: 5 } })
    const definitions = [nulls, bounded, volume, fresh, where]
    const counters = definitions.map((definition) => new Expectation.Counters(definition))
    const rows = new Map<string, ReturnType<typeof order>>()
    let seed = 7
    const random = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) % n
    for (let step = 0; step < 3_000; step++) {
      const id = `o${random(40)}`
      const before = rows.get(id) ?? null
      // Few distinct timestamps, so rows share the newest one and deleting it falls back.
      const after = random(4) === 0 ? null : order(id, random(6) === 0 ? null : random(70), random(2) === 0 ? "open" : "done", random(5) === 0 ? null : random(12))
      if (after === null) rows.delete(id)
      else rows.set(id, after)
      for (const counter of counters) counter.apply(before, after)
      const now = 10
      for (const [i, definition] of definitions.entries()) {
        const live = [...rows.values()].filter((row) => definition.where === undefined || (definition.where as (row: unknown) => boolean)(row))
        const stamps = live.map((row) => row.placedAt).filter((stamp): stamp is number => stamp !== null)
        const newest = stamps.length === 0 ? null : Math.max(...stamps)
        const amounts = live.map((row) => row.amount)
        const values = amounts.filter((amount): amount is number => amount !== null)
        const outside = values.filter((value) => value < 10 || value > 50).length
        const expected = definition.invariant.kind === "freshness"
          ? newest === null ? null : now - newest
          : definition.invariant.kind === "rowCount"
          ? live.length
          : definition.invariant.kind === "nullRate"
          ? live.length === 0 ? null : (live.length - values.length) / live.length
          : values.length === 0 ? null : outside / values.length
        assert.strictEqual(counters[i]!.metricAt(now), expected, `${definition.name} at step ${step}`)
        if (definition.invariant.kind === "freshness") assert.strictEqual(counters[i]!.newestStamp, newest)
        assert.strictEqual(counters[i]!.statusAt(now), counters[i]!.evaluate(now).status)
      }
    }
  })

  it.effect("useExpectation answers null outside a served app", () =>
    Effect.map(useExpectation(nulls), (observed) => assert.isNull(observed)))
})

for (const tier of tiers) {
  describe(`expectations: ${tier.name}`, () => {
    it.scoped("each kind goes violated and recovered, carrying the causing write's provenance", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const transitions = yield* record
        assert.deepStrictEqual(yield* Effect.all([statusOf("amount-nulls"), statusOf("amount-bounds"), statusOf("volume"), statusOf("fresh")]), [
          "unknown",
          "unknown",
          "holding",
          "unknown"
        ])
        yield* store.insert(Orders, order("o1", 10)).pipe(as(1))
        assert.deepStrictEqual(yield* transitions, [])
        yield* store.insert(Orders, order("o2", null)).pipe(as(2))
        yield* store.insert(Orders, order("o3", 500)).pipe(as(3))
        yield* store.insert(Orders, order("o4", 20)).pipe(as(4))
        yield* store.update(Orders, "o3", { amount: 50 }).pipe(as(5))
        yield* store.delete(Orders, "o4").pipe(as(6))
        assert.deepStrictEqual((yield* transitions).filter((t) => !t.startsWith("open-orders")), [
          "amount-nulls:violated:trace-2", // 1 null of 2
          "amount-bounds:violated:trace-3", // 500 is out of [0, 100]
          "amount-nulls:recovered:trace-4", // 1 of 4 = 0.25, not above
          "volume:violated:trace-4", // 4 rows > 3
          "amount-bounds:recovered:trace-5",
          "amount-nulls:violated:trace-6", // back to 1 of 3
          "volume:recovered:trace-6"
        ])
        const registry = yield* ExpectationRegistry
        const violated = yield* registry.violations()
        assert.deepStrictEqual(violated.map((v) => v.name), ["amount-nulls", "open-orders"])
        assert.deepStrictEqual(violated[0]!.lastCause, {
          traceId: "trace-6",
          subjectId: "user-6",
          procedure: "orders.write",
          table: "orders",
          op: "delete",
          rowId: "o4",
          at: 0
        })
        assert.approximately(violated[0]!.metric!, 1 / 3, 1e-12)
        assert.deepStrictEqual(violated[0]!.threshold, { maxRate: 0.25 })
        assert.isNull(yield* registry.get("nope"))
      }).pipe(Effect.provide(stack(tier.client(), plugin))))

    it.scoped("a row entering or leaving `where` on update moves the count", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const transitions = yield* record
        yield* store.insert(Orders, order("a", 1, "open"))
        yield* store.insert(Orders, order("b", 1, "closed"))
        yield* store.update(Orders, "b", { status: "open" }).pipe(as(7))
        assert.strictEqual((yield* (yield* ExpectationRegistry).get("open-orders"))?.metric, 2)
        yield* store.update(Orders, "a", { status: "closed" }).pipe(as(8))
        yield* store.update(Orders, "a", { amount: 2 })
        assert.strictEqual((yield* (yield* ExpectationRegistry).get("open-orders"))?.metric, 1)
        assert.deepStrictEqual((yield* transitions).filter((t) => t.startsWith("open-orders")), [
          "open-orders:violated:trace-7",
          "open-orders:recovered:trace-8"
        ])
      }).pipe(Effect.provide(stack(tier.client(), plugin))))

    it.scoped("unknown: no rows to divide by, only null values, no timestamp", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Orders, order("n", null, "open", null))
        // A null amount: nullRate is known (1 of 1), valueBounds has no value to judge, freshness no timestamp.
        assert.deepStrictEqual(yield* Effect.all([statusOf("amount-nulls"), statusOf("amount-bounds"), statusOf("fresh")]), [
          "violated",
          "unknown",
          "unknown"
        ])
        yield* store.delete(Orders, "n")
        assert.strictEqual(yield* statusOf("amount-nulls"), "unknown")
      }).pipe(Effect.provide(stack(tier.client(), plugin))))

    it.scoped("freshness ages out on the clock with no cause, and a fresh write recovers it", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const transitions = yield* record
        yield* store.insert(Orders, order("f1", 1, "open", 0)).pipe(as(1))
        assert.strictEqual(yield* statusOf("fresh"), "holding")
        yield* TestClock.adjust("60 seconds")
        assert.strictEqual(yield* statusOf("fresh"), "holding") // exactly maxAgeMs old is still fresh
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(yield* statusOf("fresh"), "violated")
        const observed = yield* (yield* ExpectationRegistry).get("fresh")
        assert.isNull(observed?.lastCause)
        assert.strictEqual(observed?.since, 60_001)
        yield* store.insert(Orders, order("f2", 1, "closed", 60_001)).pipe(as(9))
        assert.deepStrictEqual((yield* transitions).filter((t) => t.startsWith("fresh")), ["fresh:violated:null", "fresh:recovered:trace-9"])
        // Deleting the newest row falls back to the next newest (f1, 60 s old by now).
        yield* TestClock.adjust("30 seconds")
        yield* store.delete(Orders, "f2").pipe(as(10))
        assert.strictEqual(yield* statusOf("fresh"), "violated")
        assert.strictEqual((yield* (yield* ExpectationRegistry).get("fresh"))?.lastCause?.traceId, "trace-10")
      }).pipe(Effect.provide(stack(tier.client(), plugin))))
  })
}

/** Boots twice on one database: the second boot finds the violation, its `since` and its cause. */
const restart = (client: () => Client) =>
  Effect.gen(function*() {
    yield* Effect.gen(function*() {
      const store = yield* Store.Store
      yield* TestClock.setTime(5_000)
      yield* store.insert(Orders, order("r1", 1)).pipe(as(1))
      yield* store.insert(Orders, order("r2", null)).pipe(as(2))
      assert.strictEqual(yield* statusOf("amount-nulls"), "violated")
    }).pipe(Effect.provide(stack(client(), plugin)), Effect.scoped)
    yield* TestClock.setTime(9_000)
    yield* Effect.gen(function*() {
      const observed = yield* (yield* ExpectationRegistry).get("amount-nulls")
      assert.strictEqual(observed?.status, "violated")
      assert.strictEqual(observed?.since, 5_000)
      assert.strictEqual(observed?.lastCause?.traceId, "trace-2")
      assert.strictEqual(observed?.lastEvaluatedAt, 9_000)
      // And it recovers from there.
      const store = yield* Store.Store
      yield* store.update(Orders, "r2", { amount: 3 }).pipe(as(3))
      assert.strictEqual(yield* statusOf("amount-nulls"), "holding")
    }).pipe(Effect.provide(stack(client(), plugin)), Effect.scoped)
    yield* Effect.gen(function*() {
      const observed = yield* (yield* ExpectationRegistry).get("amount-nulls")
      assert.strictEqual(observed?.status, "holding")
      assert.strictEqual(observed?.lastCause?.traceId, "trace-3")
    }).pipe(Effect.provide(stack(client(), plugin)), Effect.scoped)
  })

describe("expectations survive a restart", () => {
  it.scoped("on SQLite", () => {
    const file = sqliteFile()
    return restart(() => file)
  })
  it.scoped.skipIf(Pg.serverUrl === null)("on PostgreSQL", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* restart(() => Pg.layerClient(url) as Client)
    }))
})
