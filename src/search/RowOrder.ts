/**
 * Per-row ordering of index writes: a (index, row) whose write is being retried or repaired is
 * "busy". A change to a busy row is not written inline; it marks the row dirty, and the retry or
 * repair re-reads the row from the database after its attempt (the failed event is never
 * replayed), again while the row keeps changing. So writes for one (index, row) never land out
 * of order.
 */
import { Effect } from "effect"

/** The mark of a busy row: set when a change arrived during its retry or repair. */
export interface Mark {
  dirty: boolean
}

/** The busy rows of one sync engine, by ledger key (`driftId`). */
export const make = () => {
  const busy = new Map<string, Mark>()
  return {
    /** The mark of a busy row, if it is busy. */
    get: (key: string): Mark | undefined => busy.get(key),
    /** Marks the row busy now (before its retry is forked, so the next change sees it). */
    claim: (key: string): void => void busy.set(key, { dirty: false }),
    /** Frees a row `claim` marked busy. */
    release: (key: string): void => void busy.delete(key),
    /** How many rows are busy. */
    size: (): number => busy.size,
    /** Runs `body` with the row busy (keeping a mark `claim` set); frees it after. */
    exclusive: <A, E>(key: string, body: (mark: Mark) => Effect.Effect<A, E>) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          const mark = busy.get(key) ?? { dirty: false }
          busy.set(key, mark)
          return mark
        }),
        body,
        () => Effect.sync(() => busy.delete(key))
      )
  }
}
