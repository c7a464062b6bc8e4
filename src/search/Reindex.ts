/**
 * Reindex (spec 2.4): a keyset walk of the table in pages of `reindexBatchSize`, written into a
 * fresh index that is swapped in at the end, so rows deleted meanwhile leave no orphan. Changes
 * during the walk go to both indexes (see `Rebuilding`); rows they touched are re-read before the
 * swap. One reindex per index at a time, across the fleet.
 */
import { Effect, Exit, Option, Stream } from "effect"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Backoff from "./Backoff.js"
import type * as Lease from "./Lease.js"
import type { Resolved, Sync } from "./Options.js"
import type { Document, Rebuild, SearchBackendShape } from "./SearchBackend.js"
import type * as Stats from "./Stats.js"
import { DocumentInvalid } from "./SyncError.js"
import type { LedgerWriteFailed, SyncError } from "./SyncError.js"

/** Progress of a reindex. */
export interface ReindexProgress {
  readonly index: string
  readonly phase: "walking" | "catching-up" | "swapping" | "done"
  /** Rows written to the fresh index so far. */
  readonly done: number
  /** Rows in the table when the walk began. */
  readonly total: number
}

/**
 * A fresh index being built: the rows changed since its walk began, and the gate of the live
 * writes that copy a change into it. Once `swapping` is set no write enters it any more (the live
 * index is the fresh one, or about to be: a write into the old name would re-create the rebuild
 * index the swap dropped), and the swap waits for the copies already under way (`gate`).
 */
export interface Building {
  readonly rebuild: Rebuild
  readonly touched: Set<string>
  swapping: boolean
  readonly gate: Effect.Semaphore
}

/** Permits of a `Building` gate: a copy takes one, the swap all of them. */
export const gatePermits = 1_000_000

/** The fresh indexes being built, by index name. */
export type Rebuilding = Map<string, Building>

/**
 * Copies a live write into the fresh index of `building`, unless its swap has begun (the row is
 * in `touched`: re-read before the swap, or recorded for the sweep after it).
 */
export const copy = <E>(building: Building, write: (rebuild: Rebuild) => Effect.Effect<void, E>): Effect.Effect<void, E> =>
  Effect.suspend(() => building.swapping ? Effect.void : building.gate.withPermits(1)(Effect.suspend(() => building.swapping ? Effect.void : write(building.rebuild))))

/** Reindexing over the sync engine's parts. */
export const make = (options: {
  readonly backend: SearchBackendShape
  readonly store: StoreShape
  readonly indexes: ReadonlyArray<Resolved>
  readonly sync: Sync
  readonly rebuilding: Rebuilding
  readonly derive: (index: Resolved, row: unknown, rowId: string) => Effect.Effect<Document, DocumentInvalid>
  readonly stats: Pick<Effect.Effect.Success<ReturnType<typeof Stats.make>>, "count" | "setReindexed">
  readonly record: (index: Resolved, rowId: string, state: "failed", error: SyncError, attempts: number) => Effect.Effect<void, LedgerWriteFailed>
  readonly withLease: ReturnType<typeof Lease.make>["withLease"]
}) => {
  const { backend, derive, indexes, rebuilding, record, stats, store, sync, withLease } = options
  const retryTransient = Backoff.retryTransient(sync)
  const reindexing = new Set<string>()

  const reindex = (indexName: string, onProgress: (progress: ReindexProgress) => Effect.Effect<void> = () => Effect.void) =>
    Effect.gen(function*() {
      const index = indexes.find((candidate) => candidate.name === indexName)
      if (index === undefined) return yield* Effect.dieMessage(`no index "${indexName}"`)
      const total = yield* store.count(index.table)
      let done = 0
      const seen = backend.rebuild === undefined ? new Set<string>() : undefined
      const rebuild: Rebuild = backend.rebuild !== undefined ? yield* backend.rebuild(index.spec) : {
        // Without a fresh index: write into the live one, then remove what the walk did not see.
        upsert: (docs) => backend.upsert(index.spec.index, docs),
        remove: (ids) => backend.remove(index.spec.index, ids),
        swap: Effect.gen(function*() {
          if (backend.documents === undefined) {
            return yield* Effect.logWarning(`search: backend "${backend.name}" cannot list documents; orphans of "${indexName}" stay`)
          }
          const orphans: Array<string> = []
          yield* Stream.runForEach(backend.documents(index.spec.index), (doc) =>
            Effect.sync(() => {
              if (!seen!.has(doc.id)) orphans.push(doc.id)
            }))
          if (orphans.length > 0) yield* backend.remove(index.spec.index, orphans)
        }),
        abort: Effect.void
      }
      const touched = new Set<string>()
      const building: Building = { rebuild, touched, swapping: false, gate: yield* Effect.makeSemaphore(gatePermits) }
      rebuilding.set(index.name, building)
      yield* Effect.addFinalizer((exit) =>
        Effect.zipRight(
          Effect.sync(() => rebuilding.delete(index.name)),
          Exit.isSuccess(exit) ? Effect.void : rebuild.abort
        )
      )
      yield* onProgress({ index: indexName, phase: "walking", done, total })
      yield* store.walk(index.table, { pageSize: sync.reindexBatchSize }).pipe(
        Stream.grouped(sync.reindexBatchSize),
        Stream.runForEach((chunk) =>
          Effect.gen(function*() {
            const docs: Array<Document> = []
            for (const row of chunk) {
              const rowId = (row as { readonly id: string }).id
              seen?.add(rowId)
              const doc = yield* Effect.either(derive(index, row, rowId))
              if (doc._tag === "Right") docs.push(doc.right)
              else {
                yield* stats.count(index, "dropped")
                yield* record(index, rowId, "failed", doc.left, 1)
              }
            }
            if (docs.length > 0) yield* retryTransient(rebuild.upsert(docs))
            done += chunk.length
            yield* onProgress({ index: indexName, phase: "walking", done, total })
          })
        )
      )
      // Rows changed during the walk may have been written before their page: re-read them.
      for (let pass = 0; pass < 10 && touched.size > 0; pass++) {
        const ids = [...touched]
        touched.clear()
        yield* onProgress({ index: indexName, phase: "catching-up", done, total })
        for (const rowId of ids) {
          const row = yield* store.get(index.table, rowId)
          if (Option.isNone(row)) yield* retryTransient(rebuild.remove([rowId]))
          else {
            seen?.add(rowId)
            const doc = yield* Effect.either(derive(index, row.value, rowId))
            if (doc._tag === "Right") yield* retryTransient(rebuild.upsert([doc.right]))
          }
        }
      }
      yield* onProgress({ index: indexName, phase: "swapping", done, total })
      // No copy enters the fresh index from here on; the swap waits for the ones under way.
      building.swapping = true
      yield* building.gate.withPermits(gatePermits)(retryTransient(rebuild.swap))
      // Anything still changing after the last pass is left to the sweep.
      for (const rowId of touched) {
        yield* record(index, rowId, "failed", new DocumentInvalid({ index: index.name, rowId, message: "changed during reindex swap" }), 0)
      }
      yield* stats.setReindexed(index, done)
      yield* onProgress({ index: indexName, phase: "done", done, total })
      return { index: indexName, rows: done }
    }).pipe(Effect.scoped)

  /**
   * Reindex, one at a time per index across the fleet (two rebuilds of one index would also
   * build into the same fresh generation and drop each other's pages).
   */
  return (indexName: string, onProgress?: (progress: ReindexProgress) => Effect.Effect<void>) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        if (reindexing.has(indexName)) return false
        reindexing.add(indexName)
        return true
      }),
      (acquired) => acquired ? withLease(`reindex:${indexName}`, reindex(indexName, onProgress)) : Effect.succeed(Option.none()),
      (acquired) => Effect.sync(() => acquired && reindexing.delete(indexName))
    )
}
