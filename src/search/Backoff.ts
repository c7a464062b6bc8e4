/**
 * Capped exponential backoff of the sync engine (spec 2.2, 8): the delay before a retry, and a
 * retry of one reindex step.
 */
import { Duration, Effect, Schedule } from "effect"
import type { SearchBackendError } from "./Errors.js"
import type { Sync } from "./Options.js"
import type { SyncError } from "./SyncError.js"

/**
 * The wait before retry number `attempt` (from 0): the base delay doubled per attempt, at least
 * what the engine asked for (`Retry-After`), at most `retryMaxDelayMs`.
 */
export const delay = (sync: Sync, attempt: number, error: SyncError): number => {
  const backoff = Math.min(sync.retryBaseDelayMs * 2 ** attempt, sync.retryMaxDelayMs)
  const asked = error._tag === "SearchBackendError" ? error.retryAfterMs ?? 0 : 0
  return Math.min(Math.max(backoff, asked), sync.retryMaxDelayMs)
}

/**
 * `step` retried on a transient failure with the sync backoff (`retries` times): one busy moment
 * of the engine (or a SQLite writer lock held by the app's own connection) must not throw away
 * the pages a reindex wrote so far.
 */
export const retryTransient = (sync: Sync) => <A>(step: Effect.Effect<A, SearchBackendError>) =>
  Effect.retry(step, {
    while: (error) => error.kind === "transient",
    times: sync.retries,
    schedule: Schedule.exponential(Duration.millis(sync.retryBaseDelayMs)).pipe(
      Schedule.union(Schedule.spaced(Duration.millis(sync.retryMaxDelayMs)))
    )
  })
