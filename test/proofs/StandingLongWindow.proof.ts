/**
 * PROOF (standing, not fixed here: src/standing is owned by standing-rev). A cost budget with
 * `window: "month"` asks Effect's clock for one sleep per rollover of 28–31 days, and Effect's live
 * clock takes any sleep beyond 2^31 − 1 ms (24.8 days) for an infinite one
 * (`globalClockScheduler.unsafeSchedule` in effect/src/internal/clock.ts returns without a timer):
 * the rollover loop (CostEngine.rolloverLoop) and the ledger prune loop (CostEngine.pruneLoop) of a
 * monthly budget stop forever after boot — no `exceeded → ok` notification at a month's end, and
 * the cost ledger is never pruned again. Same class: an expectation's freshness wait
 * (ExpectationEngine, `maxAgeMs` > 24.8 days). The aggregates scheduler had it too (fixed, see
 * test/aggregates/LongSchedules.test.ts).
 *
 * Run: npx vitest run --config test/proofs/vitest.config.ts
 */
import { assert, describe, it } from "@effect/vitest"
import type { Clock, Duration } from "effect"
import { Duration as D, Effect, TestClock } from "effect"
import * as Store from "../../src/kernel/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { CostRegistry, defineCostBudget, defineExpectation, standingPlugin } from "../../src/standing/index.js"
import { Orders, stack } from "../standing/support.js"

const maxTimerMillis = 2 ** 31 - 1
const day = 86_400_000

/** Runs `effect` on the TestClock, recording every sleep asked of the clock. */
const recordingSleeps = <A, E, R>(effect: (asked: Array<number>) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(TestClock.testClock(), (clock) => {
    const asked: Array<number> = []
    const recording: Clock.Clock = Object.assign(Object.create(Object.getPrototypeOf(clock)) as Clock.Clock, clock, {
      sleep: (duration: Duration.Duration) => {
        asked.push(D.toMillis(duration))
        return clock.sleep(duration)
      }
    })
    return Effect.withClock(effect(asked), recording)
  })

describe("standing: waits longer than a timer", () => {
  it.scoped("a 30-day freshness expectation never asks the clock for a sleep a timer cannot hold", () =>
    recordingSleeps((asked) =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* Subject.asSystem(store.insert(Orders, { id: "o1", tenantId: "acme", amount: 1, status: "open", placedAt: 0 }))
        yield* TestClock.adjust(31 * day)
        for (const ms of asked) assert.isAtMost(ms, maxTimerMillis, `a sleep of ${ms} ms (${(ms / day).toFixed(1)} days)`)
      }).pipe(Effect.provide(stack(null, standingPlugin({
        expectations: [defineExpectation({ name: "monthly-load", on: { table: Orders }, invariant: { kind: "freshness", column: "placedAt", maxAgeMs: 30 * day } })]
      }))))))

  it.scoped("a monthly budget's rollover never asks the clock for a sleep a timer cannot hold", () =>
    recordingSleeps((asked) =>
      Effect.gen(function*() {
        const registry = yield* CostRegistry
        yield* registry.record({ tenantId: "acme", unit: "tokens", amount: 20 })
        yield* TestClock.adjust(31 * day)
        for (const ms of asked) assert.isAtMost(ms, maxTimerMillis, `a sleep of ${ms} ms (${(ms / day).toFixed(1)} days)`)
      }).pipe(Effect.provide(stack(null, standingPlugin({ budgets: [defineCostBudget({ name: "monthly", limit: 10, window: "month" })] }))))))
})
