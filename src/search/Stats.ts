/**
 * Sync counters of one replica (`_fw_search_stats`): buffered in memory and added to the replica's
 * stats rows per `statsFlushIntervalMs`, or once `statsFlushMaxBuffered` counts are waiting (0: a
 * durable write per count).
 */
import { Clock, Effect, Option } from "effect"
import type { StoreShape } from "../kernel/store/Store.js"
import type { Resolved, Sync } from "./Options.js"
import { driftId, SearchStats } from "./tables.js"

/** What is counted per index. */
export interface Counters {
  synced: number
  removed: number
  dropped: number
}

/** The counters of `indexes` on `replica`; a flush triggered by `count` runs through `background`. */
export const make = (options: {
  readonly store: StoreShape
  readonly indexes: ReadonlyArray<Resolved>
  readonly sync: Sync
  readonly replica: string
  readonly background: <E>(effect: Effect.Effect<void, E>) => Effect.Effect<void>
}) =>
  Effect.gen(function*() {
    const { background, indexes, replica, store, sync } = options
    const counters = new Map<string, Counters>(indexes.map((index) => [index.name, { synced: 0, removed: 0, dropped: 0 }]))
    let buffered = 0
    let flushScheduled = false
    // Set once a change of another replica was seen: the stats rows then say the fleet shares them.
    let sawRemote = false

    /** Adds the buffered counters to this replica's stats rows. */
    const flushLock = yield* Effect.makeSemaphore(1)
    const flush: Effect.Effect<void> = flushLock.withPermits(1)(Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      for (const index of indexes) {
        const pending = counters.get(index.name)!
        const delta = { ...pending }
        pending.synced = pending.removed = pending.dropped = 0
        const id = driftId(index.name, replica)
        const outcome = yield* Effect.either(Effect.gen(function*() {
          const existing = yield* store.get(SearchStats, id)
          const base = Option.getOrElse(existing, () => ({
            id, indexName: index.name, replica, synced: 0, removed: 0, dropped: 0, fleet: false,
            lastReindexAt: null, lastReindexRows: null, seenAt: now
          }))
          yield* store.upsert(SearchStats, {
            ...base,
            synced: base.synced + delta.synced,
            removed: base.removed + delta.removed,
            dropped: base.dropped + delta.dropped,
            fleet: base.fleet || sawRemote,
            seenAt: now
          })
        }))
        if (outcome._tag === "Left") {
          // Put the counts back for the next flush.
          pending.synced += delta.synced
          pending.removed += delta.removed
          pending.dropped += delta.dropped
          yield* Effect.logWarning("search: could not flush sync stats", outcome.left)
          return
        }
      }
      buffered = 0
    }))

    const count = (index: Resolved, key: keyof Counters, n = 1) =>
      Effect.suspend(() => {
        counters.get(index.name)![key] += n
        buffered += n
        if (sync.statsFlushIntervalMs === 0) return flush
        if (buffered >= sync.statsFlushMaxBuffered && !flushScheduled) {
          flushScheduled = true
          return background(Effect.ensuring(flush, Effect.sync(() => flushScheduled = false)))
        }
        return Effect.void
      })

    /** Records a finished reindex of `index` in this replica's stats row. */
    const setReindexed = (index: Resolved, rows: number) =>
      Effect.gen(function*() {
        yield* flush
        const now = yield* Clock.currentTimeMillis
        const id = driftId(index.name, replica)
        const existing = yield* store.get(SearchStats, id)
        if (Option.isSome(existing)) yield* store.upsert(SearchStats, { ...existing.value, lastReindexAt: now, lastReindexRows: rows })
      }).pipe(Effect.catchAll((e) => Effect.logWarning("search: could not record the reindex in stats", e)))

    return {
      count,
      flush,
      setReindexed,
      /** Notes that a change of another replica was delivered here. */
      noteRemote: (): void => {
        sawRemote = true
      },
      /** Whether a change of another replica was delivered here. */
      sawRemote: (): boolean => sawRemote
    }
  })
