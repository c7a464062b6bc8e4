/**
 * Spec 3.7 on every tier: the state table (fresh, stale-kept, decode mismatch, merge, overlap
 * skip), the schedules (interval, hybrid on change, manual) on the TestClock, the boot modes, read
 * options and staleness, and the noop analytics sink.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Layer, Queue, Schema, Scope, TestClock } from "effect"
import { defineAggregate } from "../../src/aggregates/index.js"
import type { TriggerOutcome } from "../../src/aggregates/AggregateScheduler.js"
import { Store } from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"
import { base, baseOn, Events, scheduler, tiers } from "./support.js"

const Row = Schema.Struct({ k: Schema.String, total: Schema.Number })
type Row = typeof Row.Type

/** A build the test steers: rows, a failure, or a wait. */
const steered = () => {
  let next: () => Effect.Effect<ReadonlyArray<unknown>, unknown> = () => Effect.succeed([])
  let calls = 0
  return {
    build: () => {
      calls++
      return next()
    },
    set: (f: () => Effect.Effect<ReadonlyArray<unknown>, unknown>) => {
      next = f
    },
    rows: (rows: ReadonlyArray<unknown>) => {
      next = () => Effect.succeed(rows)
    },
    calls: () => calls
  }
}

const takeOutcome = (queue: Queue.Dequeue<TriggerOutcome>, name: string) =>
  Queue.take(queue).pipe(Effect.repeat({ until: (o) => o.name === name }))

for (const tier of tiers) {
  describe(`aggregate refresh: ${tier.name}`, () => {
    it.scoped("3.7: replace → fresh; build throws → stale-kept with lastError; bad row → exact mismatch text; success clears lastError", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const b = steered()
        const agg = defineAggregate({ name: "totals", refresh: "1h", output: Row, build: b.build })
        const s = yield* scheduler(tier.name, ctx, [agg])
        yield* s.booted
        b.rows([{ k: "a", total: 1 }, { k: "b", total: 2 }])
        assert.strictEqual(yield* s.refresh("totals"), "refreshed")
        assert.deepStrictEqual(yield* s.read("totals"), [{ k: "a", total: 1 }, { k: "b", total: 2 }])
        const fresh = yield* s.meta("totals")
        assert.strictEqual(fresh.rowCount, 2)
        assert.strictEqual(fresh.lastError, null)
        assert.strictEqual(fresh.refreshedAt?.getTime(), 0)

        b.set(() => Effect.sync(() => { throw new Error("warehouse offline") }))
        yield* TestClock.adjust(1_000)
        assert.strictEqual(yield* s.refresh("totals"), "failed")
        assert.deepStrictEqual(yield* s.read("totals"), [{ k: "a", total: 1 }, { k: "b", total: 2 }])
        const kept = yield* s.meta("totals")
        assert.strictEqual(kept.lastError, "warehouse offline")
        assert.strictEqual(kept.refreshedAt?.getTime(), 0, "refreshedAt is the last good refresh")

        b.rows([{ k: "a", total: 5 }, { k: "b", total: "x" }])
        assert.strictEqual(yield* s.refresh("totals"), "failed")
        assert.strictEqual(
          (yield* s.meta("totals")).lastError,
          `output schema mismatch: row[1] failed output-schema decode at total: Expected number, actual "x"`
        )
        assert.deepStrictEqual(yield* s.read("totals"), [{ k: "a", total: 1 }, { k: "b", total: 2 }])

        b.rows([{ k: "c", total: 3 }])
        assert.strictEqual(yield* s.refresh("totals"), "refreshed")
        assert.deepStrictEqual(yield* s.read("totals"), [{ k: "c", total: 3 }])
        const again = yield* s.meta("totals")
        assert.strictEqual(again.lastError, null)
        assert.strictEqual(again.rowCount, 1)
      }))

    it.scoped("3.7: merge upserts by mergeKey and keeps rows a refresh did not return; a row without the key fails", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const b = steered()
        const agg = defineAggregate({ name: "merged", refresh: "1h", output: Row, build: b.build, strategy: "merge", mergeKey: "k" })
        const s = yield* scheduler(tier.name, ctx, [agg])
        yield* s.booted
        b.rows([{ k: "a", total: 1 }, { k: "b", total: 2 }])
        yield* s.refresh("merged")
        b.rows([{ k: "b", total: 20 }, { k: "c", total: 30 }])
        yield* s.refresh("merged")
        assert.deepStrictEqual(yield* s.read("merged", { orderBy: "k" }), [{ k: "a", total: 1 }, { k: "b", total: 20 }, { k: "c", total: 30 }])
        assert.strictEqual((yield* s.meta("merged")).rowCount, 3)
        b.rows([{ total: 1 }])
        assert.strictEqual(yield* s.refresh("merged"), "failed")
        assert.strictEqual((yield* s.read("merged")).length, 3)
      }))

    it.scoped("3.7: a trigger while a refresh runs is skipped (overlap policy skip)", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const b = steered()
        const agg = defineAggregate({ name: "slow", refresh: "1h", output: Row, build: b.build })
        const s = yield* scheduler(tier.name, ctx, [agg])
        yield* s.booted
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        b.set(() => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Deferred.await(release)), Effect.as([{ k: "x", total: 1 }])))
        const first = yield* Effect.fork(s.refresh("slow"))
        yield* Deferred.await(started)
        assert.strictEqual(yield* s.refresh("slow"), "skipped")
        const calls = b.calls()
        yield* Deferred.succeed(release, undefined)
        assert.strictEqual(yield* first.await.pipe(Effect.flatten), "refreshed")
        assert.strictEqual(b.calls(), calls, "the skipped trigger did not build")
        assert.deepStrictEqual(yield* s.read("slow"), [{ k: "x", total: 1 }])
      }))

    it.scoped("interval: refreshes on the Effect clock at each interval; nextRefreshAt says when", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const b = steered()
        let n = 0
        b.set(() => Effect.sync(() => [{ k: "n", total: ++n }]))
        const agg = defineAggregate({ name: "ticker", refresh: "5m", output: Row, build: b.build, bootRefresh: "async" })
        const s = yield* scheduler(tier.name, ctx, [agg])
        const outcomes = yield* s.outcomes
        yield* s.booted
        yield* Queue.takeAll(outcomes) // the boot refresh may land after subscribing
        assert.deepStrictEqual(yield* s.read("ticker"), [{ k: "n", total: 1 }])
        assert.strictEqual((yield* s.meta("ticker")).nextRefreshAt?.getTime(), 300_000)
        yield* TestClock.adjust(300_000)
        assert.strictEqual((yield* takeOutcome(outcomes, "ticker")).outcome, "refreshed")
        assert.deepStrictEqual(yield* s.read("ticker"), [{ k: "n", total: 2 }])
        assert.strictEqual((yield* s.meta("ticker")).refreshedAt?.getTime(), 300_000)
        assert.strictEqual((yield* s.meta("ticker")).nextRefreshAt?.getTime(), 600_000)
        yield* TestClock.adjust(300_000)
        yield* takeOutcome(outcomes, "ticker")
        assert.deepStrictEqual(yield* s.read("ticker"), [{ k: "n", total: 3 }])
      }))

    it.scoped("hybrid: a change to a listed table refreshes after debounceMs (restarted by each change); the interval still bounds staleness", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const store = ctx.unsafeMap.get(Store.key) as Store["Type"]
        const agg = defineAggregate({
          name: "eventCount",
          refresh: { interval: "1h", onChange: [Events], debounceMs: 2_000 },
          output: Row,
          build: ({ store }) => Effect.map(store.count(Events), (total) => [{ k: "events", total }]),
          bootRefresh: "sync"
        })
        const s = yield* scheduler(tier.name, ctx, [agg])
        const outcomes = yield* s.outcomes
        assert.deepStrictEqual(yield* s.read("eventCount"), [{ k: "events", total: 0 }])
        yield* store.insert(Events, { kind: "a" })
        assert.strictEqual((yield* s.meta("eventCount")).nextRefreshAt?.getTime(), 2_000)
        yield* TestClock.adjust(1_500)
        yield* store.insert(Events, { kind: "b" })
        yield* TestClock.adjust(1_500)
        assert.deepStrictEqual(yield* s.read("eventCount"), [{ k: "events", total: 0 }], "debounce restarted by the second change")
        yield* TestClock.adjust(500)
        const fired = yield* takeOutcome(outcomes, "eventCount")
        assert.deepStrictEqual([fired.trigger, fired.outcome, fired.at], ["change", "refreshed", 3_500])
        assert.deepStrictEqual(yield* s.read("eventCount"), [{ k: "events", total: 2 }])
        yield* TestClock.adjust(3_600_000 - 3_500)
        const timed = yield* takeOutcome(outcomes, "eventCount")
        assert.strictEqual(timed.trigger, "schedule")
      }))

    it.scoped("boot modes: sync waits for the first refresh (and a failing one fails boot); async starts empty; persistent serves prior rows while it refreshes", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const syncAgg = defineAggregate({ name: "s", refresh: "1h", output: Row, build: () => [{ k: "s", total: 1 }], bootRefresh: "sync" })
        const s1 = yield* scheduler(tier.name, ctx, [syncAgg])
        assert.deepStrictEqual(yield* s1.read("s"), [{ k: "s", total: 1 }])

        const failing = defineAggregate({ name: "f", refresh: "1h", output: Row, build: () => Promise.reject(new Error("no")), bootRefresh: "sync" })
        const exit = yield* Effect.exit(scheduler(tier.name, ctx, [failing]))
        assert.isTrue(Exit.isFailure(exit))
        assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), "AggregateBootFailed")

        // A first life fills rows, then a restart under each mode.
        const b = steered()
        b.rows([{ k: "old", total: 1 }])
        const first = yield* Scope.make()
        const live = yield* scheduler(tier.name, ctx, [defineAggregate({ name: "p", refresh: "1h", output: Row, build: b.build, bootRefresh: "sync" })], first)
        assert.deepStrictEqual(yield* live.read("p"), [{ k: "old", total: 1 }])
        yield* Scope.close(first, Exit.void)

        const release = yield* Deferred.make<void>()
        b.set(() => Effect.as(Deferred.await(release), [{ k: "new", total: 2 }]))
        const second = yield* Scope.make()
        const persistent = yield* scheduler(tier.name, ctx, [defineAggregate({ name: "p", refresh: "1h", output: Row, build: b.build })], second)
        // Memory storage lives and dies with the process: nothing to rehydrate there.
        assert.deepStrictEqual(yield* persistent.read("p"), tier.name === "memory" ? [] : [{ k: "old", total: 1 }])
        yield* Deferred.succeed(release, undefined)
        yield* persistent.booted
        assert.deepStrictEqual(yield* persistent.read("p"), [{ k: "new", total: 2 }])
        yield* Scope.close(second, Exit.void)

        const hold = yield* Deferred.make<void>()
        b.set(() => Effect.as(Deferred.await(hold), [{ k: "newer", total: 3 }]))
        const async = yield* scheduler(tier.name, ctx, [defineAggregate({ name: "p", refresh: "1h", output: Row, build: b.build, bootRefresh: "async" })])
        assert.deepStrictEqual(yield* async.read("p"), [])
        assert.strictEqual((yield* async.meta("p")).refreshedAt, null)
        yield* Deferred.succeed(hold, undefined)
        yield* async.booted
        assert.deepStrictEqual(yield* async.read("p"), [{ k: "newer", total: 3 }])
      }))

    it.scoped("read options: where (value or list), orderBy and direction, limit and offset; maxAgeMs → AggregateStale", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const rows: ReadonlyArray<Row> = [{ k: "a", total: 3 }, { k: "b", total: 1 }, { k: "c", total: 2 }, { k: "d", total: 1 }]
        const agg = defineAggregate({ name: "r", refresh: "1h", output: Row, build: () => rows, bootRefresh: "async", indexes: [["total"], ["k", "total"]] })
        const s = yield* scheduler(tier.name, ctx, [agg])
        const stale = yield* Effect.flip(s.read("r", { maxAgeMs: 10 }))
        assert.strictEqual(stale._tag, "AggregateStale")
        yield* s.booted
        assert.deepStrictEqual(yield* s.read("r", { where: { total: 1 } }), [{ k: "b", total: 1 }, { k: "d", total: 1 }])
        assert.deepStrictEqual(yield* s.read("r", { where: { k: ["a", "c"] } }), [{ k: "a", total: 3 }, { k: "c", total: 2 }])
        assert.deepStrictEqual((yield* s.read("r", { orderBy: "total", direction: "desc" })).map((r) => (r as Row).k), ["a", "c", "b", "d"])
        assert.deepStrictEqual((yield* s.read("r", { orderBy: "total", limit: 2, offset: 1 })).map((r) => (r as Row).k), ["d", "c"])
        assert.strictEqual((yield* s.read("r", { maxAgeMs: 10 })).length, 4)
        yield* TestClock.adjust(11)
        const old = yield* Effect.flip(s.read("r", { maxAgeMs: 10 }))
        assert.strictEqual(old._tag, "AggregateStale")
        assert.strictEqual((yield* Effect.flip(s.read("nope")))._tag, "AggregateNotFound")
      }))

    it.scoped("analytics: the noop sink fails the read; the refresh records AnalyticsCapabilityNotSupported and keeps the last good rows", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        let useAnalytics = false
        const agg = defineAggregate({
          name: "top",
          refresh: "1h",
          output: Row,
          bootRefresh: "sync",
          build: ({ analytics }) =>
            useAnalytics
              ? Effect.map(analytics.topN({ event: "view", by: "page", n: 3 }), (top) => top.map((t) => ({ k: t.key, total: t.count })))
              : Effect.succeed([{ k: "seed", total: 1 }])
        })
        const s = yield* scheduler(tier.name, ctx, [agg])
        useAnalytics = true
        assert.strictEqual(yield* s.refresh("top"), "failed")
        assert.strictEqual(
          (yield* s.meta("top")).lastError,
          `AnalyticsCapabilityNotSupported: analytics provider "noop" does not support topN (configure an analytics provider)`
        )
        assert.deepStrictEqual(yield* s.read("top"), [{ k: "seed", total: 1 }])
      }))
  })
}

if (Pg.serverUrl !== null) {
  describe("aggregate refresh: two app instances on one PostgreSQL", () => {
    it.scoped("each scheduled trigger refreshes once across both instances, and both serve the same rows", () =>
      Effect.gen(function*() {
        const url = yield* Pg.freshDatabase
        const ctx1 = yield* Layer.build(baseOn(Pg.layerClient(url)))
        const ctx2 = yield* Layer.build(baseOn(Pg.layerClient(url)))
        let builds = 0
        const agg = () => defineAggregate({ name: "shared", refresh: "1m", output: Row, build: () => [{ k: "builds", total: ++builds }] })
        const s1 = yield* scheduler("pg", ctx1, [agg()])
        const s2 = yield* scheduler("pg", ctx2, [agg()])
        const q1 = yield* s1.outcomes
        const q2 = yield* s2.outcomes
        yield* s1.booted
        yield* s2.booted
        yield* Queue.takeAll(q1)
        yield* Queue.takeAll(q2)
        const afterBoot = builds
        for (let round = 1; round <= 3; round++) {
          yield* TestClock.adjust(60_000)
          const [a, b] = [yield* takeOutcome(q1, "shared"), yield* takeOutcome(q2, "shared")]
          assert.deepStrictEqual([a.outcome, b.outcome].sort(), ["refreshed", "skipped"], `round ${round}`)
          assert.strictEqual(builds, afterBoot + round)
          assert.deepStrictEqual(yield* s1.read("shared"), yield* s2.read("shared"))
          assert.deepStrictEqual(yield* s1.read("shared"), [{ k: "builds", total: builds }])
        }
      }))
  })
}
