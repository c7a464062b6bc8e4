/**
 * Schedules longer than a JavaScript timer can hold: Effect treats a sleep beyond 2^31 − 1 ms
 * (24.8 days) as infinite (its clock never sets a timer for it), so an aggregate whose next slot is
 * further away — `refresh: "30d"`, or a monthly cron between two far 1sts — would never refresh
 * again. The scheduler waits in steps a timer can hold, re-reading the clock after each.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue, Schema, TestClock } from "effect"
import { defineAggregate } from "../../src/aggregates/index.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { overlong, recordingSleeps } from "../support/RecordingClock.js"
import { base, Orders, scheduler, tiers } from "./support.js"

const Row = Schema.Struct({ k: Schema.String, total: Schema.Number })
const day = 86_400_000

const memory = tiers.find((tier) => tier.name === "memory")!

describe("aggregate schedules longer than a timer", () => {
  for (const [label, refresh, first] of [
    ["an interval of 30 days", "30d", 30 * day],
    ["a monthly cron (1 Jan → 1 Feb: 31 days)", { cron: "0 0 1 * *", timezone: "UTC" }, Date.UTC(1970, 1, 1)]
  ] as const) {
    it.scoped(`${label}: refreshes when its slot comes, and never asks the clock for a sleep a timer cannot hold`, () =>
      recordingSleeps((asked) =>
        Effect.gen(function*() {
          const ctx = yield* base(memory)
          let n = 0
          const agg = defineAggregate({ name: "monthly", refresh, output: Row, build: () => Effect.sync(() => [{ k: "n", total: ++n }]), bootRefresh: "async" })
          const s = yield* scheduler("memory", ctx, [agg])
          const outcomes = yield* s.outcomes
          yield* s.booted
          yield* Queue.takeAll(outcomes)
          assert.strictEqual((yield* s.meta("monthly")).nextRefreshAt?.getTime(), first)
          yield* TestClock.adjust(first)
          assert.strictEqual((yield* Queue.take(outcomes)).outcome, "refreshed")
          assert.deepStrictEqual(yield* s.read("monthly"), [{ k: "n", total: 2 }])
          assert.isAbove(asked.length, 0)
          assert.deepStrictEqual(overlong(asked), [])
        })))
  }

  it.scoped("an on-change debounce of 30 days: refreshes when it ends, and never asks the clock for a sleep a timer cannot hold", () =>
    recordingSleeps((asked) =>
      Effect.gen(function*() {
        const ctx = yield* base(memory)
        let n = 0
        const agg = defineAggregate({
          name: "quiet",
          refresh: { interval: "365d", onChange: [Orders], debounceMs: 30 * day },
          output: Row,
          build: () => Effect.sync(() => [{ k: "n", total: ++n }]),
          bootRefresh: "async"
        })
        const s = yield* scheduler("memory", ctx, [agg])
        const outcomes = yield* s.outcomes
        yield* s.booted
        yield* Queue.takeAll(outcomes)
        yield* Subject.asSystem(Effect.flatMap(Store.Store, (store) => store.insert(Orders, { id: "o1", g: "a", h: true, x: 1 }))).pipe(
          Effect.provide(ctx)
        )
        assert.strictEqual((yield* s.meta("quiet")).nextRefreshAt?.getTime(), 30 * day)
        yield* TestClock.adjust(30 * day)
        const outcome = yield* Queue.take(outcomes)
        assert.deepStrictEqual([outcome.trigger, outcome.outcome, outcome.at], ["change", "refreshed", 30 * day])
        assert.deepStrictEqual(overlong(asked), [])
      })))
})
