/**
 * A TestClock that records every sleep asked of it. The TestClock wakes a sleep of any length, but
 * Effect's live clock takes one beyond 2^31 − 1 ms (24.8 days) for an infinite one and never wakes
 * it: a test of a long wait checks, with this, that no sleep asked is longer than a timer holds.
 */
import type { Clock, Duration } from "effect"
import { Duration as D, Effect, TestClock } from "effect"

/** What Effect's live clock can wait for in one sleep (`MAX_TIMER_MILLIS` in effect/internal/clock). */
export const maxTimerMillis = 2 ** 31 - 1

/** Runs `effect` on the TestClock, pushing the length (ms) of every sleep asked of the clock to `asked`. */
export const recordingSleeps = <A, E, R>(effect: (asked: Array<number>) => Effect.Effect<A, E, R>) =>
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

/** The sleeps of `asked` longer than a timer holds, as readable text (none: an empty list). */
export const overlong = (asked: ReadonlyArray<number>): ReadonlyArray<string> =>
  asked.filter((ms) => ms > maxTimerMillis).map((ms) => `${ms} ms (${(ms / 86_400_000).toFixed(1)} days)`)
