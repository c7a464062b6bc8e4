/**
 * Standing waits longer than a timer holds. Effect's live clock takes a sleep beyond 2^31 − 1 ms
 * (24.8 days) for an infinite one (it sets no timer), so a monthly budget's rollover and ledger
 * pruning, and a freshness expectation with `maxAgeMs` over 24.8 days, asked for in one sleep,
 * never came: no `exceeded → ok` at a month's end, a ledger never pruned again, an SLA that never
 * aged out. The TestClock wakes any sleep, so each test also checks that no sleep asked of the
 * clock is longer than a timer holds (the loops wait in steps of a day, `Sleep.sleepUntil`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Ref, Schedule, TestClock, TestServices } from "effect"
import * as Store from "../../src/kernel/store/Store.js"
import type { BudgetCrossing } from "../../src/standing/index.js"
import { CostEvents, CostRegistry, defineCostBudget, defineExpectation, ExpectationRegistry, standingPlugin } from "../../src/standing/index.js"
import { overlong, recordingSleeps } from "../support/RecordingClock.js"
import { Orders, stack } from "./support.js"

const day = 86_400_000

describe("standing: waits longer than a timer", () => {
  it.scoped("a 30-day freshness expectation ages out at 30 days, asking the clock for no sleep a timer cannot hold", () =>
    recordingSleeps((asked) =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const registry = yield* ExpectationRegistry
        yield* store.insert(Orders, { id: "o1", tenantId: "acme", amount: 1, status: "open", placedAt: 0 })
        assert.strictEqual((yield* registry.get("monthly-load"))?.status, "holding")
        yield* TestClock.adjust(30 * day)
        assert.strictEqual((yield* registry.get("monthly-load"))?.status, "holding")
        yield* TestClock.adjust(1)
        const aged = yield* registry.get("monthly-load")
        assert.deepStrictEqual([aged?.status, aged?.since, aged?.lastCause], ["violated", 30 * day + 1, null])
        assert.deepStrictEqual(overlong(asked), [])
      }).pipe(Effect.provide(stack(null, standingPlugin({
        expectations: [defineExpectation({ name: "monthly-load", on: { table: Orders }, invariant: { kind: "freshness", column: "placedAt", maxAgeMs: 30 * day } })]
      }))))))

  it.scoped("a monthly budget rolls over and prunes its ledger at the month's end, asking the clock for no sleep a timer cannot hold", () =>
    recordingSleeps((asked) =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const registry = yield* CostRegistry
        const seen = yield* Ref.make<ReadonlyArray<BudgetCrossing>>([])
        yield* registry.subscribe((crossing) => Ref.update(seen, (all) => [...all, crossing]))
        const heard = Effect.map(Ref.getAndSet(seen, []), (all) => all.map((c) => `${c.from}->${c.to}@${c.at}`))
        yield* registry.record({ tenantId: "acme", unit: "tokens", amount: 20 }) // January 1970: 31 days
        assert.deepStrictEqual(yield* heard, ["ok->warn@0", "warn->exceeded@0"])
        yield* TestClock.adjust(31 * day - 1)
        assert.deepStrictEqual(yield* heard, [])
        yield* TestClock.adjust(1)
        assert.deepStrictEqual(yield* heard, [`exceeded->ok@${31 * day}`])
        // The pruning runs in the background: polled on the real clock until the ledger is empty.
        yield* TestServices.provideLive(store.count(CostEvents).pipe(
          Effect.repeat({ until: (count) => count === 0, schedule: Schedule.spaced("5 millis") }),
          Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error("the ledger was never pruned") })
        ))
        assert.deepStrictEqual(overlong(asked), [])
      }).pipe(Effect.provide(stack(null, standingPlugin({ budgets: [defineCostBudget({ name: "monthly", limit: 10, window: "month" })] }))))))
})
