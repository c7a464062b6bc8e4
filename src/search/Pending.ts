/**
 * Pending-sync markers (`_fw_search_pending`): how a committed change can never reach the index
 * silently wrong.
 *
 * On the SQL tiers (the memory tier dies with its process, rows and all, so a marker there would
 * guard nothing), the plugin's stager writes one marker per change to an indexed table inside the writing
 * transaction, named by the change's `ref`. If the marker cannot be written, the transaction rolls
 * back and the write fails: a change is committed only together with the record that it still has
 * to reach the index (spec 3.1: the tap fails loudly rather than reporting success). The listener
 * deletes the marker once every index of the table has the change, or its failure is in the drift
 * ledger (which takes over). A marker that outlives its process (a crash between commit and the
 * engine's acknowledgement) is moved to the drift ledger by the sweep, which then repairs the row.
 */
import { Clock, Deferred, Effect, Exit, FiberId, Option } from "effect"
import type { PendingChange } from "../kernel/changes/ChangeTap.js"
import * as StageStatements from "../kernel/store/StageStatements.js"
import type { StoreShape } from "../kernel/store/Store.js"
import type { Resolved } from "./Options.js"
import { driftId, SearchDrift, SearchPending } from "./tables.js"

/**
 * How old a marker must be before the sweep takes it for abandoned. A live listener clears its
 * markers within moments; one lagging more than this behind (on another replica) gets a redundant
 * repair, which re-reads the row and so still converges.
 */
export const abandonedAfterMs = 60_000

/** Markers of this process whose change its listener has not handled yet (ref → staged at). */
export type InFlight = Map<string, number>

/**
 * The stager: one marker per change to `tables`, written in the writing transaction (one
 * statement). Its failure fails the write.
 */
export const stage = (tables: ReadonlySet<string>, inFlight: InFlight) =>
  function*(changes: ReadonlyArray<PendingChange>): StageStatements.Plan<void> {
    let markers: Array<{ readonly id: string; readonly tableName: string; readonly rowId: string; readonly stagedAt: number }> | undefined
    for (const change of changes) {
      if (change.ref === undefined || !tables.has(change.table)) continue
      ;(markers ??= []).push({ id: change.ref, tableName: change.table, rowId: change.id, stagedAt: change.at })
    }
    if (markers === undefined) return
    yield* StageStatements.insert(SearchPending, markers)
    for (const marker of markers) inFlight.set(marker.id, marker.stagedAt)
  }

/** Markers deleted per statement at most. */
const maxBatch = 1000

/**
 * Deletes markers in the background, many per statement: the listener hands over refs as it settles
 * changes and never waits for the delete. A marker is named by its change's `ref` (one per change),
 * so settling an older write of a row never clears the marker of a newer one. A marker whose delete
 * fails stays, and the sweep repairs its row later (a redundant write, never a lost one).
 */
export const makeClearer = (store: StoreShape, background: (effect: Effect.Effect<void>) => Effect.Effect<void>) => {
  let queued: Array<string> = []
  let running = false
  let waiters: Array<Deferred.Deferred<void>> = []
  /**
   * Lets the listener go on while it keeps settling changes (each yield gives it a turn), so one
   * delete takes every marker it settled meanwhile rather than one each; stops once a turn adds none.
   */
  const gather = (seen: number): Effect.Effect<void> =>
    Effect.suspend(() =>
      queued.length > seen && queued.length < maxBatch ? Effect.zipRight(Effect.yieldNow(), gather(queued.length)) : Effect.void
    )
  const flush: Effect.Effect<void> = Effect.suspend(() => gather(0)).pipe(Effect.zipRight(Effect.suspend(() => {
    if (queued.length === 0) {
      running = false
      for (const waiter of waiters) Deferred.unsafeDone(waiter, Exit.void)
      waiters = []
      return Effect.void
    }
    const batch = queued
    queued = []
    // One `DELETE … WHERE id IN (…)` per batch, and no change event: nothing listens to markers
    // (the sweep reads the table), and under fleet scope they must not become outbox traffic.
    return store.purge(SearchPending, batch).pipe(
      Effect.catchAll((error) => Effect.logWarning(`search: could not clear ${batch.length} pending-sync markers; the sweep repairs their rows`, error)),
      Effect.zipRight(flush)
    )
  })))
  return {
    /** Queues the marker `ref` for deletion. */
    clear: (ref: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        queued.push(ref)
        if (running) return Effect.void
        running = true
        return background(flush)
      }),
    /** Refs queued and not yet deleted. */
    queued: (ref: string) => queued.includes(ref),
    /** Completes once every marker queued so far is deleted (or its delete failed). */
    idle: Effect.suspend((): Effect.Effect<void> => {
      if (!running) return Effect.void
      const waiter = Deferred.unsafeMake<void>(FiberId.none)
      waiters.push(waiter)
      return Deferred.await(waiter)
    })
  }
}

/**
 * Moves up to `limit` abandoned markers (older than `abandonedAfterMs`, not this process's own
 * unhandled ones) to the drift ledger, one entry per index of the marker's table, in one
 * transaction per marker. Returns how many it moved.
 */
export const adopt = (
  store: StoreShape,
  indexes: ReadonlyArray<Resolved>,
  inFlight: InFlight,
  isQueued: (ref: string) => boolean,
  limit: number
) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    // Forget own refs whose transaction rolled back (never delivered): they are no one's marker.
    for (const [ref, at] of inFlight) if (now - at > abandonedAfterMs * 60) inFlight.delete(ref)
    const candidates = yield* store.find(SearchPending, { where: { stagedAt: { lt: now - abandonedAfterMs } }, orderBy: "stagedAt", limit })
    const written: Array<string> = []
    for (const marker of candidates) {
      if (inFlight.has(marker.id) || isQueued(marker.id)) continue
      const entries = yield* store.transaction(Effect.gen(function*() {
        const entries: Array<string> = []
        for (const index of indexes) {
          if (index.table.name !== marker.tableName) continue
          const id = driftId(index.name, marker.rowId)
          // An entry already there is repaired anyway.
          if (Option.isSome(yield* store.get(SearchDrift, id, { forUpdate: true }))) continue
          yield* store.insert(SearchDrift, {
            id,
            indexName: index.name,
            rowId: marker.rowId,
            tableName: marker.tableName,
            state: "failed",
            lastError: "the change committed but its index write was never confirmed (the process stopped before the engine answered)",
            errorKind: "transient",
            attempts: 0,
            firstFailedAt: marker.stagedAt,
            lastFailedAt: now
          })
          entries.push(id)
        }
        yield* store.delete(SearchPending, marker.id).pipe(Effect.catchTag("RowNotFound", () => Effect.void))
        return entries
      })).pipe(
        // Another replica adopting or recording the same row meanwhile: the next sweep sees it.
        Effect.catchTag("DuplicateRow", () => Effect.succeed([]))
      )
      written.push(...entries)
    }
    return written
  })
