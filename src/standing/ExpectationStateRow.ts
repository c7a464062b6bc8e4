/**
 * An expectation's state row (`_fw_expectation_state`) as the one record of when its current status
 * began and which write caused it, shared by every replica and by restarts.
 *
 * Replicas of a fleet receive the same changes in different orders, so each sees its own sequence
 * of transitions: under concurrent writes that move a metric back and forth across its threshold,
 * one may see `violated` and `recovered` where another saw neither. Their counters, and so their
 * statuses, agree once every change has reached every replica; the start of the status and its
 * cause are settled by the row instead:
 *
 * - the row carries a `revision`, bumped by every write, made under the row's lock;
 * - after a change of status a replica reads the row under the lock: when the row already holds its
 *   status, from an episode it has not itself seen end, it adopts the row's `since` and cause;
 *   otherwise it records its own start (and cause) as the next revision;
 * - every state-row change it hears of (the change tap: its own writes and, under fleet scope, the
 *   other replicas') with a revision above the highest it knows is adopted when it holds the status
 *   this replica is in.
 *
 * So the first recorded start of the current episode wins everywhere. Why every replica ends on the
 * row's last revision: a replica writes only after a change of status of its own (finitely many),
 * and writes its status at the time of the locked read; its last write follows its last change, so
 * the last revision holds the status every replica ends in. Each replica hears that revision: it
 * adopts it then if it is already in that status, or reads it under the lock after it moves there.
 *
 * "Seen end": a replica that adopted (or wrote) a revision and then changed status has left that
 * episode; coming back to the same status is a new episode, which must not take the old start
 * over (a single process flapping fast would otherwise report the start of an episode it saw end).
 * The `writer` column names the engine instance and its episode, so a replica also recognises its
 * own write of an episode it has since left, whichever path (read, tap, commit) it learns of it by.
 */
import type { Option } from "effect"
import { Clock, Effect } from "effect"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import type * as Expectation from "./Expectation.js"
import type * as Registries from "./Registries.js"
import { ExpectationState } from "./tables.js"

/** No revision: nothing known, nothing shown or seen end. */
const none = -1

/** What a replica keeps of an expectation's status and of the state row. */
export interface Tracked {
  status: Expectation.Status
  /** Shown: when the current status began, and its cause (this replica's own, or adopted from the row). */
  since: number | null
  lastCause: Registries.Cause | null
  /** This replica's episodes of a status, counted: bumped at every change of status. */
  episode: number
  /** When, and by which write, this replica saw the current status begin: what it records. */
  ownSince: number | null
  ownCause: Registries.Cause | null
  /** The highest revision of the row heard of. */
  known: number
  /** The revision whose start and cause are shown, `none` while showing this replica's own. */
  shown: number
  /** The highest revision of an episode this replica has seen end: never adopted again. */
  ended: number
}

/** The bookkeeping of a replica that has not evaluated yet. */
export const initial = {
  episode: 0,
  ownSince: null,
  ownCause: null,
  known: none,
  shown: none,
  ended: none
} as const

/** A state row as read or heard of. */
interface Recorded {
  readonly revision: number
  readonly status: unknown
  readonly since: number | null
  readonly cause: Registries.Cause | null
  readonly writer: string | null
}

/** A row as stored (decoded) or carried by a change (encoded: the same JSON values); a row written before revisions counts as revision 0. */
const recorded = (row: Readonly<Record<string, unknown>>): Recorded => ({
  revision: typeof row["revision"] === "number" ? row["revision"] : 0,
  status: row["status"],
  since: typeof row["since"] === "number" ? row["since"] : null,
  cause: (row["cause"] ?? null) as Registries.Cause | null,
  writer: typeof row["writer"] === "string" ? row["writer"] : null
})

/** The state-row protocol of one engine instance over `store` (`instance`: unique to the engine). */
export const make = (store: StoreShape, instance: string) => {
  const self = `${instance}#`
  const writerOf = (tracked: Tracked) => `${self}${tracked.episode}`

  const adopt = (tracked: Tracked, row: Recorded) => {
    tracked.shown = row.revision
    tracked.since = row.since
    tracked.lastCause = row.cause
  }

  /** Learns of a revision (once: the first path it comes by decides). */
  const hear = (tracked: Tracked, row: Recorded) => {
    if (row.revision <= tracked.known) return
    tracked.known = row.revision
    if (row.writer !== null && row.writer.startsWith(self)) {
      // Its own write: the episode it was written for is the current one, or one it has left.
      if (row.writer === writerOf(tracked)) adopt(tracked, row)
      else tracked.ended = Math.max(tracked.ended, row.revision)
      return
    }
    if (row.status === tracked.status) adopt(tracked, row)
  }

  /** A state-row change heard from the change tap; a deleted row starts the revisions over. */
  const heard = (tracked: Tracked, row: Readonly<Record<string, unknown>> | null) => {
    if (row !== null) return hear(tracked, recorded(row))
    tracked.known = none
    tracked.shown = none
    tracked.ended = none
  }

  /** Called at every change of status, after `status`, `since` and `lastCause` are set: a new episode. */
  const began = (tracked: Tracked) => {
    tracked.episode++
    tracked.ended = Math.max(tracked.ended, tracked.shown)
    tracked.shown = none
    tracked.ownSince = tracked.since
    tracked.ownCause = tracked.lastCause
  }

  /** The row under its lock: adopted when it already holds this episode's status, else this replica's start recorded over it. */
  const settle = (tracked: Tracked, name: string) =>
    store.transaction(Effect.gen(function*() {
      const existing: Option.Option<Readonly<Record<string, unknown>>> = yield* store.get(ExpectationState, name, { forUpdate: true })
      const current = existing._tag === "Some" ? recorded(existing.value) : null
      if (current !== null) {
        hear(tracked, current)
        if (current.status === tracked.status && current.revision > tracked.ended) {
          adopt(tracked, current)
          return null
        }
      } else if (tracked.known !== none) {
        // Deleted meanwhile: the revisions start over.
        heard(tracked, null)
      }
      const row = {
        id: name,
        status: tracked.status,
        since: tracked.ownSince,
        cause: tracked.ownCause as unknown as Record<string, unknown> | null,
        revision: (current?.revision ?? 0) + 1,
        writer: writerOf(tracked),
        updatedAt: yield* Clock.currentTimeMillis
      }
      // A missing row is inserted: a concurrent first insert fails (and is read on the retry) instead of being overwritten.
      yield* current === null ? store.insert(ExpectationState, row) : store.upsert(ExpectationState, row)
      return row
    }))

  /** Settles the row after a change of status (or at boot); a failure is logged (the next change of status settles again). */
  const persist = (tracked: Tracked, name: string) =>
    settle(tracked, name).pipe(
      Effect.retry({ times: 3, while: (error) => error._tag === "DuplicateRow" }),
      Effect.tap((written) => written === null ? Effect.void : Effect.sync(() => hear(tracked, recorded(written)))),
      Subject.asSystem,
      Effect.catchAllCause((cause) => Effect.logWarning(`expectation "${name}": state not persisted`, cause))
    )

  return {
    began,
    /** Adopts a stored row read at boot when it holds the status (see `hear`). */
    boot: (tracked: Tracked, row: Readonly<Record<string, unknown>>) => hear(tracked, recorded(row)),
    heard,
    persist,
    /** Whether the shown start is the row's (else the row is yet to be settled). */
    settled: (tracked: Tracked) => tracked.shown !== none
  }
}
