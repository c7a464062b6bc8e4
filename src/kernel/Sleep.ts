/**
 * Sleeps of any length on the Effect `Clock`. Effect's live clock takes a sleep beyond
 * 2^31 − 1 ms (24.8 days, what a JavaScript timer holds) for an infinite one: it sets no timer, so
 * a monthly rollover or a 30-day wait asked of it in one piece would never end. These wait in
 * steps of at most a day, re-reading the clock after each step, so the wait ends when the clock
 * reaches its due time (also after the clock jumps: a TestClock, a suspended laptop).
 */
import { Clock, Effect } from "effect"

/** The longest single sleep asked of the clock: a day, well inside what a timer holds. */
export const maxStepMs = 86_400_000

/**
 * Waits until the clock reads `dueMillis` (epoch ms) or later; a due time already past waits no
 * time, an infinite one (a window that never ends) forever, without waking every day.
 */
export const sleepUntil = (dueMillis: number): Effect.Effect<void> =>
  dueMillis === Number.POSITIVE_INFINITY ? Effect.never : Effect.flatMap(Clock.currentTimeMillis, (now) =>
    dueMillis - now > maxStepMs
      ? Effect.zipRight(Effect.sleep(maxStepMs), sleepUntil(dueMillis))
      : Effect.sleep(Math.max(0, dueMillis - now)))

/** Waits `millis` from now, however long (see `sleepUntil`). */
export const sleepFor = (millis: number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => sleepUntil(now + millis))
