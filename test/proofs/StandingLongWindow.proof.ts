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
import { CostRegistry, defineCostBudget, standingPlugin } from "../../src/standing/index.js"
import { stack } from "../standing/support.js"

const maxTimerMillis = 2 ** 31 - 1
const day = 86_400_000

describe("standing: a monthly budget's rollover", () => {
  it.scoped("never asks the clock for a sleep a timer cannot hold", () =>
    Effect.flatMap(TestClock.testClock(), (clock) => {
      const asked: Array<number> = []
      const recording: Clock.Clock = Object.assign(Object.create(Object.getPrototypeOf(clock)) as Clock.Clock, clock, {
        sleep: (duration: Duration.Duration) => {
          asked.push(D.toMillis(duration))
          return clock.sleep(duration)
        }
      })
      const monthly = defineCostBudget({ name: "monthly", limit: 10, window: "month" })
      return Effect.withClock(
        Effect.gen(function*() {
          const registry = yield* CostRegistry
          yield* registry.record({ tenantId: "acme", unit: "tokens", amount: 20 })
          yield* TestClock.adjust(31 * day)
          for (const ms of asked) assert.isAtMost(ms, maxTimerMillis, `a sleep of ${ms} ms (${(ms / day).toFixed(1)} days)`)
        }).pipe(Effect.provide(stack(null, standingPlugin({ budgets: [monthly] })))),
        recording
      )
    }))
})
