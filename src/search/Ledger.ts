/**
 * The drift ledger (`_fw_search_drift`, spec 3.1): one entry per (index, row) whose change did not
 * reach the index, repaired by the sweep. The keys of the entries are kept in memory, so a later
 * successful write clears its entry without a read per change.
 */
import { Clock, Effect, Option, Stream } from "effect"
import type { StoreError } from "../kernel/Errors.js"
import type { StoreShape } from "../kernel/store/Store.js"
import type { Resolved } from "./Options.js"
import { describe, isTransient, LedgerWriteFailed } from "./SyncError.js"
import type { SyncError } from "./SyncError.js"
import { driftId, SearchDrift } from "./tables.js"

/** The ledger over `store`, its known entries loaded. */
export const make = (store: StoreShape) =>
  Effect.gen(function*() {
    const keys = new Set<string>()
    yield* store.walk(SearchDrift, { pageSize: 1000 }).pipe(Stream.runForEach((entry) => Effect.sync(() => keys.add(entry.id))))

    /** A ledger write that failed, as the error that must not go unnoticed. */
    const failure = (index: Resolved, rowId: string) => (error: StoreError) =>
      new LedgerWriteFailed({ index: index.name, rowId, message: error.message })

    /** Records (or updates) the entry of (`index`, `rowId`). */
    const record = (index: Resolved, rowId: string, state: "retrying" | "failed", error: SyncError, attempts: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const id = driftId(index.name, rowId)
        const existing = keys.has(id) ? yield* store.get(SearchDrift, id) : Option.none()
        yield* store.upsert(SearchDrift, {
          id,
          indexName: index.name,
          rowId,
          tableName: index.table.name,
          state,
          lastError: describe(error).slice(0, 2000),
          errorKind: isTransient(error) ? "transient" : "permanent",
          attempts: Option.match(existing, { onNone: () => attempts, onSome: (entry) => entry.attempts + attempts }),
          firstFailedAt: Option.match(existing, { onNone: () => now, onSome: (entry) => entry.firstFailedAt }),
          lastFailedAt: now
        })
        keys.add(id)
      }).pipe(Effect.mapError(failure(index, rowId)))

    /** Removes the entry of (`index`, `rowId`), if there is one. */
    const clear = (index: Resolved, rowId: string) =>
      Effect.suspend(() => {
        const id = driftId(index.name, rowId)
        if (!keys.has(id)) return Effect.void
        return store.delete(SearchDrift, id).pipe(
          Effect.catchTag("RowNotFound", () => Effect.void),
          Effect.tap(() => Effect.sync(() => keys.delete(id)))
        )
      })

    return {
      record,
      clear,
      failure,
      /** Notes entries written elsewhere (adopted markers, repaired rows). */
      known: (id: string): void => void keys.add(id)
    }
  })
