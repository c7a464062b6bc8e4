/**
 * `Sleep.sleepUntil`/`sleepFor`: waits of any length in steps a timer holds (Effect's live clock
 * never wakes a single sleep beyond 2^31 − 1 ms), ending when the clock reaches the due time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, TestClock } from "effect"
import * as Sleep from "../../src/kernel/Sleep.js"
import { overlong, recordingSleeps } from "../support/RecordingClock.js"

const day = 86_400_000

describe("Sleep", () => {
  it.effect("a 40-day wait ends exactly at its due time, asking the clock for a day at most at a time", () =>
    recordingSleeps((asked) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.fork(Effect.zipRight(Sleep.sleepFor(40 * day), Clock.currentTimeMillis))
        yield* TestClock.adjust(40 * day - 1)
        assert.isNull(fiber.unsafePoll())
        yield* TestClock.adjust(1)
        assert.strictEqual(yield* Fiber.join(fiber), 40 * day)
        assert.deepStrictEqual(overlong(asked), [])
        assert.isAtMost(Math.max(...asked), Sleep.maxStepMs)
      })))

  it.effect("a due time already past waits no time; a clock that jumps ends the wait at the next step", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(10 * day)
      const past = yield* Effect.fork(Sleep.sleepUntil(5 * day))
      yield* TestClock.adjust(0)
      assert.isNotNull(past.unsafePoll())
      const long = yield* Effect.fork(Effect.zipRight(Sleep.sleepUntil(100 * day), Clock.currentTimeMillis))
      // The clock jumps (a suspended machine): the wait ends when its current step does, not 90 days later.
      yield* TestClock.setTime(100 * day)
      assert.strictEqual(yield* Fiber.join(long), 100 * day)
    }))

  it.effect("an infinite due time never ends and asks the clock for nothing", () =>
    recordingSleeps((asked) =>
      Effect.gen(function*() {
        const never = yield* Effect.fork(Sleep.sleepFor(Number.POSITIVE_INFINITY))
        yield* TestClock.adjust(400 * day)
        assert.isNull(never.unsafePoll())
        assert.deepStrictEqual(asked, [])
        yield* Fiber.interrupt(never)
      })))
})
