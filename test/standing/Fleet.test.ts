/**
 * Two app instances on one PostgreSQL database, fleet change scope: after concurrent writes on
 * both, every registry agrees, and matches the counts the writes imply (nothing counted twice);
 * an expectation's `since` and cause agree too, though the writes move a metric back and forth
 * across its threshold so the replicas see different sequences of transitions.
 */
import { FetchHttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { isDeepStrictEqual } from "node:util"
import * as PluginHost from "../../src/server/PluginHost.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Provenance from "../../src/kernel/changes/Provenance.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import {
  CostRegistry,
  defineCostBudget,
  defineExpectation,
  defineExperiment,
  ExpectationRegistry,
  ExperimentRegistry,
  standingPlugin
} from "../../src/standing/index.js"
import * as Pg from "../support/Pg.js"
import { Events, Orders, tables } from "./support.js"

const plugin = standingPlugin({
  expectations: [
    defineExpectation({ name: "nulls", on: { table: Orders }, invariant: { kind: "nullRate", column: "amount", maxRate: 0.1 } }),
    defineExpectation({ name: "bounds", on: { table: Orders }, invariant: { kind: "valueBounds", column: "amount", min: 0, max: 100, maxViolationRate: 0.2 } }),
    defineExpectation({ name: "volume", on: { table: Orders, where: (row) => row.status === "open" }, invariant: { kind: "rowCount", max: 30 } })
  ],
  budgets: [defineCostBudget({ name: "tokens", unit: "tokens", limit: 50, window: "1 day" })],
  experiments: [
    defineExperiment({
      name: "checkout",
      on: { table: Events },
      subject: "userId",
      variants: [{ name: "control" }, { name: "treatment" }],
      metric: { kind: "conversionRate", column: "converted" },
      variantFrom: "arm"
    })
  ]
})

const replica = (url: string) =>
  Layer.build(
    Layer.mergeAll(plugin.registries, Layer.scopedDiscard(PluginHost.start(plugin))).pipe(
      Layer.provideMerge(Store.layerSql),
      Layer.provideMerge(ChangeTap.layerFleet({ pollMs: 200 })),
      Layer.provide(FetchHttpClient.layer),
      Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables))),
      Layer.provide(Pg.layerClient(url))
    )
  )

type Replica = Context.Context<Store.Store | ExpectationRegistry | CostRegistry | ExperimentRegistry>

/**
 * What a registry shows that must agree across replicas: everything but evaluation times (each
 * replica's own). An expectation's `since` and `lastCause` are the state row's, whatever sequence of
 * transitions each replica saw.
 */
const view = (context: Replica) =>
  Effect.gen(function*() {
    const expectations = (yield* (yield* ExpectationRegistry).snapshot()).map(({ lastEvaluatedAt: _, ...rest }) => rest)
    const costs = yield* CostRegistry
    const attribution = [...(yield* costs.attribution())].sort((a, b) => a.tenantId.localeCompare(b.tenantId))
    const budgets = (yield* costs.budgets()).map((budget) => ({
      ...budget,
      tenants: [...budget.tenants].sort((a, b) => a.tenantId.localeCompare(b.tenantId)).map(({ since: _, ...rest }) => rest)
    }))
    const experiments = yield* (yield* ExperimentRegistry).snapshot()
    return { expectations, attribution, budgets, experiments }
  }).pipe(Effect.provide(context))

/** Flapping rounds per replica: o3's amount goes out of bounds and back, each way moving `bounds` across its threshold. */
const flaps = 10

/**
 * Replica `name`'s writes: orders (some with null or out-of-bounds amounts), experiment events,
 * costs, then flapping rounds, then a last update and delete (so a replica that heard those heard all).
 */
const writes = (context: Replica, name: string) =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    const costs = yield* CostRegistry
    for (let i = 0; i < 20; i++) {
      const trace = Provenance.withProvenance({ traceId: `${name}-${i}`, subjectId: name, procedure: "fleet.write" })
      const amount = i % 7 === 0 ? null : i % 5 === 0 ? 500 : i
      yield* store.insert(Orders, { id: `${name}-o${i}`, tenantId: "acme", amount, status: i % 2 === 0 ? "open" : "closed", placedAt: i }).pipe(trace)
      yield* store.insert(Events, { id: `${name}-e${i}`, userId: `${name}-u${i % 8}`, value: i, converted: i % 3 === 0, arm: i % 2 === 0 ? "control" : "treatment" }).pipe(trace)
      yield* costs.record({ tenantId: i % 2 === 0 ? "acme" : "globex", unit: "tokens", amount: 3 }).pipe(trace)
    }
    // 6 of 32 amounts are out of bounds at the end (0.1875, holding); one more is 7 of 32 (violated).
    for (let round = 0; round < flaps; round++) {
      yield* store.update(Orders, `${name}-o3`, { amount: 500 }).pipe(Provenance.withProvenance({ traceId: `${name}-up-${round}`, subjectId: name, procedure: "fleet.flap" }))
      yield* store.update(Orders, `${name}-o3`, { amount: 3 }).pipe(Provenance.withProvenance({ traceId: `${name}-down-${round}`, subjectId: name, procedure: "fleet.flap" }))
    }
    yield* store.update(Orders, `${name}-o1`, { status: "open" })
    yield* store.delete(Orders, `${name}-o2`)
  }).pipe(Effect.provide(context))

describe("standing across replicas (PostgreSQL, fleet scope)", () => {
  it.scopedLive.skipIf(Pg.serverUrl === null)("two instances agree on every registry after concurrent writes on both", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const a = (yield* replica(url)) as Replica
      const b = (yield* replica(url)) as Replica
      yield* Effect.all([writes(a, "a"), writes(b, "b")], { concurrency: 2 })
      // Fleet delivery is asynchronous: wait until both replicas have heard every change.
      const settled = Effect.gen(function*() {
        const [left, right] = yield* Effect.all([view(a), view(b)])
        // Both may lack the other's last writes at one moment and still agree: wait for every write too.
        const complete = (side: typeof left) =>
          side.attribution.reduce((sum, tenant) => sum + tenant.total, 0) === 120 &&
          side.expectations.find((e) => e.name === "nulls")?.metric === 6 / 38 &&
          side.expectations.find((e) => e.name === "volume")?.metric === 20 &&
          side.experiments[0]!.variants.reduce((sum, arm) => sum + arm.rows, 0) === 40
        if (!complete(left) || !complete(right) || !isDeepStrictEqual(left, right)) return yield* Effect.fail("replicas disagree")
        return left
      }).pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("20 seconds"))))
      const agreed = yield* settled.pipe(Effect.orElse(() => Effect.all([view(a), view(b)]).pipe(Effect.map(([left, right]) => {
        assert.deepStrictEqual(left, right)
        return left
      }))))
      // Counted once: 40 orders minus 2 deleted; amounts null for i ∈ {0, 7, 14} per replica; 500 for i ∈ {5, 10, 15}.
      const nulls = agreed.expectations.find((e) => e.name === "nulls")!
      assert.approximately(nulls.metric!, 6 / 38, 1e-12) // o2 (amount 2) deleted: nulls stay 6 of 38
      assert.strictEqual(agreed.expectations.find((e) => e.name === "volume")!.metric, 2 * (10 + 1 - 1))
      assert.deepStrictEqual(agreed.attribution.map((t) => [t.tenantId, t.total]), [["acme", 60], ["globex", 60]])
      assert.deepStrictEqual(agreed.budgets[0]!.tenants.map((t) => [t.tenantId, t.status, t.spent]), [["acme", "exceeded", 60], ["globex", "exceeded", 60]])
      // Back in bounds after the flapping: 6 of 32 non-null amounts are out of bounds.
      const bounds = agreed.expectations.find((e) => e.name === "bounds")!
      assert.deepStrictEqual([bounds.status, bounds.metric], ["holding", 6 / 32])
      // The start of the current status (the same on both replicas) is one of the writes to orders.
      for (const observed of agreed.expectations) {
        if (observed.lastCause === null) continue
        assert.strictEqual(observed.lastCause.table, "orders", observed.name)
        assert.match(observed.lastCause.rowId, /^[ab]-o\d+$/, observed.name)
        assert.isNotNull(observed.since, observed.name)
      }
      const readout = agreed.experiments[0]!
      // Units u0..u7 per replica; even ones only ever see control, odd ones treatment.
      assert.deepStrictEqual(readout.variants.map((arm) => [arm.variant, arm.exposure, arm.rows]), [["control", 8, 20], ["treatment", 8, 20]])
      assert.strictEqual(readout.crossovers, 0)
    }), 60_000)

  it.scopedLive.skipIf(Pg.serverUrl === null)("a flap one replica sees and the other does not: both end on the same since and cause", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const a = (yield* replica(url)) as Replica
      const b = (yield* replica(url)) as Replica
      const update = (context: Replica, id: string, amount: number, trace: string) =>
        Effect.flatMap(Store.Store, (store) => store.update(Orders, id, { amount })).pipe(
          Provenance.withProvenance({ traceId: trace, subjectId: null, procedure: "fleet.flip" }),
          Effect.provide(context)
        )
      const boundsOf = (context: Replica) =>
        Effect.map(view(context), (v) => v.expectations.find((e) => e.name === "bounds")!)
      /** Waits until both replicas show `metric` for bounds (each has heard the other's writes). */
      const heard = (metric: number) =>
        Effect.all([boundsOf(a), boundsOf(b)]).pipe(
          Effect.filterOrFail(([left, right]) => left.metric === metric && right.metric === metric, () => "not heard yet"),
          Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds")))
        )
      // 1 of 8 amounts out of [0, 100] holds (0.125); 2 of 8 is violated (0.25), 0 of 8 holds.
      yield* Effect.provide(Effect.flatMap(Store.Store, (store) =>
        Effect.forEach(["a", "b"], (name) =>
          Effect.forEach([1, 2, 3, 4], (i) =>
            store.insert(Orders, { id: `${name}-o${i}`, tenantId: "acme", amount: name === "b" && i === 4 ? 500 : i, status: "closed", placedAt: i }), { discard: true }), { discard: true })), a)
      yield* heard(1 / 8)
      // Each round both move an amount across the bound at once, in opposite directions: a replica
      // hears its own write first, so one sees violated then recovered and the other no transition.
      for (let round = 0; round < 6; round++) {
        const up = round % 2 === 0 ? a : b
        const down = round % 2 === 0 ? b : a
        yield* Effect.all([
          update(up, `${up === a ? "a" : "b"}-o4`, 500, `up-${round}`),
          update(down, `${down === a ? "a" : "b"}-o4`, 4, `down-${round}`)
        ], { concurrency: 2 })
        yield* heard(1 / 8)
      }
      const [left, right] = yield* Effect.all([boundsOf(a), boundsOf(b)]).pipe(
        Effect.filterOrFail(([l, r]) => isDeepStrictEqual(l, r), () => "disagree"),
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("5 seconds"))),
        Effect.orElse(() => Effect.all([boundsOf(a), boundsOf(b)]))
      )
      assert.deepStrictEqual(left, right)
      assert.strictEqual(left.status, "holding")
    }), 60_000)
})
