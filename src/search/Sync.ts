/**
 * The sync engine of one running search plugin: applies committed changes to the backend (the
 * listener), retries transient failures in the background (`Backoff`) in per-row order
 * (`RowOrder`), keeps and repairs the drift ledger (`Ledger`, the sweep under a fleet-wide `Lease`),
 * reindexes (`Reindex`), and buffers the sync counters (`Stats`).
 *
 * Ordering: the change tap delivers one change at a time in commit order, on the plugin's own
 * listener fiber (off the writer's path: a write never waits for the engine), and the first
 * attempt runs as the change is delivered. A (index, row) whose write is being retried or repaired is "busy": later changes to
 * it are not written inline but mark it dirty, and the retry re-reads the row from the database
 * (the failed event is never replayed), re-reading again while the row keeps changing. So writes
 * for one (index, row) never land out of order.
 *
 * Durability: every change to an indexed table committed with a pending-sync marker (see
 * `Pending`), so a change is never committed without a durable record that it must reach the index.
 * A failure is written to `_fw_search_drift` (a transient one as `retrying`, so a crash during the
 * backoff still leaves it to the sweep) before the marker is cleared; when that ledger write fails,
 * the marker stays, the failure is logged, and the sweep repairs the row later. (An event without
 * a marker, made by hand, fails its delivery instead: the tap retries delivery and recording.)
 */
import type { Scope } from "effect"
import { Clock, Duration, Effect, Either, Exit, Fiber, FiberSet, Option, Schema, SchemaAST } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Backoff from "./Backoff.js"
import * as Lease from "./Lease.js"
import * as Ledger from "./Ledger.js"
import type { Resolved, Sync } from "./Options.js"
import * as Pending from "./Pending.js"
import * as Reindex from "./Reindex.js"
import * as RowOrder from "./RowOrder.js"
import type { Document, SearchBackendShape } from "./SearchBackend.js"
import * as Stats from "./Stats.js"
import { DocumentInvalid, isTransient } from "./SyncError.js"
import type { LedgerWriteFailed, SyncError } from "./SyncError.js"
import { driftId, SearchDrift, SearchStats } from "./tables.js"

export type { ReindexProgress } from "./Reindex.js"

/** The result of a repair pass. */
export interface ResyncReport {
  readonly scanned: number
  readonly repaired: number
  readonly failed: number
}

/** The per-index view of the inspect surface (spec 2.4, 4.1). */
export interface IndexView {
  readonly name: string
  readonly index: string
  readonly table: string
  readonly backend: string
  readonly synced: number
  readonly removed: number
  readonly dropped: number
  readonly pendingDrift: number
  readonly lastDriftAt: number | null
  readonly drifted: boolean
  readonly lastReindexAt: number | null
  readonly lastReindexRows: number | null
  /** `sum` under local change scope, `max` under fleet scope (spec 6 rule 6). */
  readonly aggregation: "sum" | "max"
  readonly replicas: number
  readonly retryPolicy: { readonly retries: number; readonly retryBaseDelayMs: number; readonly retryMaxDelayMs: number }
}

/** Makes the engine; background fibers (retries, sweep, stats flush) live in the current scope. */
export const make = (options: {
  readonly backend: SearchBackendShape
  readonly store: StoreShape
  readonly indexes: ReadonlyArray<Resolved>
  readonly sync: Sync
  readonly replica: string
  /** Markers this process staged whose change its listener has not handled yet. */
  readonly inFlight?: Pending.InFlight
}) =>
  Effect.gen(function*() {
    const { backend, indexes, replica, store, sync } = options
    const inFlight: Pending.InFlight = options.inFlight ?? new Map()
    const fibers = yield* FiberSet.make()
    // Background work is forked with the runtime of the plugin's start, not from the change
    // delivery that triggers it: that fiber is uninterruptible and marked as delivering.
    const runInBackground = yield* FiberSet.runtime(fibers)<never>()
    const background = <E>(effect: Effect.Effect<void, E>) => Effect.sync(() => void runInBackground(effect))
    const byTable = new Map<string, Array<Resolved>>()
    for (const index of indexes) {
      const list = byTable.get(index.table.name) ?? []
      list.push(index)
      byTable.set(index.table.name, list)
    }
    // Rows whose schema has no transformation decode to themselves: skip the decode on the hot path.
    const decoders = new Map(indexes.map((index) => {
      const plain = SchemaAST.encodedAST(index.table.schema.ast) === index.table.schema.ast
      const decode = Schema.decodeUnknownEither(index.table.schema)
      return [index.name, plain ? (row: unknown) => Either.right(row) : decode] as const
    }))
    const rows = RowOrder.make()
    const rebuilding: Reindex.Rebuilding = new Map()
    const stats = yield* Stats.make({ store, indexes, sync, replica, background })
    const ledger = yield* Ledger.make(store)
    const { withLease } = Lease.make(store, replica)
    let warnedPeer = false
    let repairedTotal = 0

    const markers = Pending.makeClearer(store, background)
    const staging = store.dialect !== "memory"

    /** The document of a row, checked: its id is the row's, its tenant the row's. */
    const derive = (index: Resolved, row: unknown, rowId: string): Effect.Effect<Document, DocumentInvalid> =>
      Effect.suspend(() => {
        const invalid = (message: string) => Effect.fail(new DocumentInvalid({ index: index.name, rowId, message }))
        let doc: Document
        try {
          doc = index.map(row)
        } catch (error) {
          return invalid(`map threw: ${error instanceof Error ? error.message : String(error)}`)
        }
        if (doc === null || typeof doc !== "object" || doc.id !== rowId) {
          return invalid(`map must return a document whose id is the row's id "${rowId}"`)
        }
        const tenantColumn = index.table.tenantField
        if (tenantColumn !== undefined) {
          const rowTenant = (row as Record<string, unknown>)[tenantColumn]
          if (doc[index.spec.tenantField] !== rowTenant) {
            return invalid(`the document's "${index.spec.tenantField}" must be the row's tenant`)
          }
        }
        return Effect.succeed(doc)
      })

    const decodeRow = (index: Resolved, encoded: unknown, rowId: string) => {
      const decoded = decoders.get(index.name)!(encoded)
      return decoded._tag === "Right"
        ? Effect.succeed(decoded.right)
        : Effect.fail(new DocumentInvalid({ index: index.name, rowId, message: "the changed row does not decode" }))
    }

    /** Writes the document (or its removal) to the live index and to a fresh one being built. */
    const write = (index: Resolved, rowId: string, doc: Document | null) =>
      Effect.gen(function*() {
        const building = rebuilding.get(index.name)
        if (building !== undefined) building.touched.add(rowId)
        if (doc === null) yield* backend.remove(index.spec.index, [rowId])
        else yield* backend.upsert(index.spec.index, [doc])
        // Copied unless the swap began meanwhile (the live write then already reaches the fresh index, or the sweep repairs the row).
        if (building !== undefined) yield* Reindex.copy(building, (rebuild) => doc === null ? rebuild.remove([rowId]) : rebuild.upsert([doc]))
        yield* stats.count(index, doc === null ? "removed" : "synced")
      })

    /**
     * Writes the document of a row's current version. When it cannot be derived, the row's
     * previous document (if it may have one: `previous`) is removed before the failure is reported:
     * left in the index it would still answer as the row (after a move to another tenant, to the
     * tenant that no longer owns it).
     */
    const writeDerived = (index: Resolved, rowId: string, derived: Effect.Effect<Document, DocumentInvalid>, previous = true) =>
      Effect.flatMap(Effect.either(derived), (doc) =>
        doc._tag === "Right"
          ? write(index, rowId, doc.right)
          : previous
          ? Effect.zipRight(write(index, rowId, null), Effect.fail(doc.left))
          : Effect.fail(doc.left))

    /** Re-reads the row and writes what it is now (its document, or its removal). */
    const resyncRow = (index: Resolved, rowId: string): Effect.Effect<void, SyncError> =>
      Effect.gen(function*() {
        const row = yield* store.get(index.table, rowId)
        if (Option.isNone(row)) return yield* write(index, rowId, null)
        yield* writeDerived(index, rowId, derive(index, row.value, rowId))
      })

    /** The background retries of one (index, row) after a transient failure. */
    const retry = (index: Resolved, rowId: string, first: SyncError) => {
      const key = driftId(index.name, rowId)
      return rows.exclusive(key, (mark) =>
        Effect.gen(function*() {
          let error = first
          let attempts = 0
          while (attempts < sync.retries && isTransient(error)) {
            yield* Effect.sleep(Duration.millis(Backoff.delay(sync, attempts, error)))
            attempts++
            mark.dirty = false
            const outcome = yield* Effect.exit(resyncRow(index, rowId))
            if (Exit.isSuccess(outcome)) {
              // Changes skipped meanwhile: the row is re-read until it stops changing.
              while (mark.dirty) {
                mark.dirty = false
                const again = yield* Effect.exit(resyncRow(index, rowId))
                if (Exit.isFailure(again)) break
              }
              yield* ledger.clear(index, rowId).pipe(Effect.catchAll((e) => Effect.logWarning(`search: could not clear ${key} from the drift ledger`, e)))
              return
            }
            const failure = outcome.cause._tag === "Fail" ? outcome.cause.error : undefined
            if (failure === undefined) return yield* Effect.failCause(outcome.cause)
            error = failure
          }
          yield* stats.count(index, "dropped")
          yield* ledger.record(index, rowId, "failed", error, attempts).pipe(
            // The entry is already there as `retrying`: the sweep still repairs it.
            Effect.catchAll((e) => Effect.logError(`search: could not mark ${key} failed in the drift ledger`, e))
          )
        })).pipe(Effect.catchAllCause((cause) => Effect.logError(`search: retry of ${key} failed unexpectedly`, cause)))
    }

    /** Handles one committed change (the plugin's `onChangeEvent`). */
    const onChange = (event: ChangeEvent): Effect.Effect<void, LedgerWriteFailed> =>
      Effect.gen(function*() {
        if (event.remote === true) stats.noteRemote()
        const targets = byTable.get(event.table)
        if (targets === undefined) return
        // Markers exist only on the SQL tiers (see `Pending.stage`).
        const ref = staging ? event.ref : undefined
        // With a marker, a ledger write that fails leaves the marker for the sweep; without one
        // (an event made by hand), the delivery fails and the tap retries it.
        let settled = true
        /** True once `written` landed; false (logged, the marker kept) when it failed. */
        const recorded = (index: Resolved, written: Effect.Effect<void, LedgerWriteFailed>) =>
          ref === undefined ? Effect.as(written, true) : Effect.as(written, true).pipe(Effect.catchAll((error) =>
            Effect.as(
              Effect.zipRight(
                Effect.sync(() => settled = false),
                Effect.logError(`search: could not write the drift ledger for ${index.name}/${event.id}; its pending-sync marker stays for the sweep`, error)
              ),
              false
            )
          ))
        for (const index of targets) {
          const key = driftId(index.name, event.id)
          const mark = rows.get(key)
          if (mark !== undefined) {
            // A retry or repair owns this row: it re-reads the row after its current attempt.
            mark.dirty = true
            const building = rebuilding.get(index.name)
            if (building !== undefined) building.touched.add(event.id)
            continue
          }
          const attempt = event.op === "delete" || event.after === null
            ? write(index, event.id, null)
            : writeDerived(
              index,
              event.id,
              Effect.flatMap(decodeRow(index, event.after, event.id), (row) => derive(index, row, event.id)),
              // A row just inserted has no previous document to take out.
              event.op !== "insert"
            )
          const outcome = yield* Effect.either(attempt)
          if (outcome._tag === "Right") {
            yield* recorded(index, ledger.clear(index, event.id).pipe(Effect.mapError(ledger.failure(index, event.id))))
            continue
          }
          const error = outcome.left
          if (isTransient(error) && sync.retries > 0) {
            // Unrecorded, the row is left to the sweep (through the marker), not retried here.
            if (!(yield* recorded(index, ledger.record(index, event.id, "retrying", error, 1)))) continue
            // Registered before delivery returns, so the next change to this row sees it busy.
            rows.claim(key)
            yield* background(retry(index, event.id, error))
          } else {
            yield* stats.count(index, "dropped")
            yield* recorded(index, ledger.record(index, event.id, "failed", error, 1))
          }
        }
        if (ref !== undefined) {
          inFlight.delete(ref)
          if (settled) yield* markers.clear(ref)
        }
      })

    /** Records a change as failed for every index of its table (a defect in the listener itself). */
    const recordEvent = (event: ChangeEvent, message: string) =>
      Effect.forEach(byTable.get(event.table) ?? [], (index) =>
        ledger.record(index, event.id, "failed", new DocumentInvalid({ index: index.name, rowId: event.id, message }), 1), { discard: true })

    /** Moves abandoned pending-sync markers to the ledger (see `Pending.adopt`). */
    const adoptAbandoned = (limit: number) =>
      !staging ? Effect.void : Effect.flatMap(Pending.adopt(store, indexes, inFlight, markers.queued, limit), (ids) =>
        Effect.sync(() => {
          for (const id of ids) ledger.known(id)
        }))

    /** Repairs ledger entries: re-reads each row and writes what it is now. */
    const repair = (entries: ReadonlyArray<typeof SearchDrift.schema.Type>) =>
      Effect.gen(function*() {
        let repaired = 0
        let failed = 0
        for (const entry of entries) {
          const index = indexes.find((candidate) => candidate.name === entry.indexName)
          if (index === undefined) {
            // An index no longer declared: nothing to repair.
            yield* store.delete(SearchDrift, entry.id).pipe(Effect.ignore)
            continue
          }
          if (rows.get(entry.id) !== undefined) continue
          const outcome = yield* rows.exclusive(
            entry.id,
            (mark) => Effect.gen(function*() {
              let result = yield* Effect.either(resyncRow(index, entry.rowId))
              while (result._tag === "Right" && mark.dirty) {
                mark.dirty = false
                result = yield* Effect.either(resyncRow(index, entry.rowId))
              }
              return result
            })
          )
          if (outcome._tag === "Right") {
            repaired++
            repairedTotal++
            ledger.known(entry.id)
            yield* ledger.clear(index, entry.rowId)
          } else {
            failed++
            yield* ledger.record(index, entry.rowId, "failed", outcome.left, 1)
          }
        }
        return { scanned: entries.length, repaired, failed }
      })

    /**
     * One sweep: the oldest `resyncBatchSize` entries, by one replica of the fleet at a time (the
     * ledger is shared; a sweep of the same entries on every replica would repeat every repair).
     */
    const sweep = Effect.map(
      withLease("sweep", Effect.zipRight(
        adoptAbandoned(sync.resyncBatchSize),
        Effect.flatMap(store.find(SearchDrift, { orderBy: "lastFailedAt", limit: sync.resyncBatchSize }), repair)
      )),
      Option.getOrElse((): ResyncReport => ({ scanned: 0, repaired: 0, failed: 0 }))
    )

    /** On-demand resync: every entry present now, in batches. */
    const resync = (indexName?: string) =>
      Effect.gen(function*() {
        yield* adoptAbandoned(Number.MAX_SAFE_INTEGER)
        const entries = yield* store.find(SearchDrift, {
          orderBy: "lastFailedAt",
          ...(indexName === undefined ? {} : { where: { indexName } })
        })
        const total: { scanned: number; repaired: number; failed: number } = { scanned: 0, repaired: 0, failed: 0 }
        for (let i = 0; i < entries.length; i += sync.resyncBatchSize) {
          const report = yield* repair(entries.slice(i, i + sync.resyncBatchSize))
          total.scanned += report.scanned
          total.repaired += report.repaired
          total.failed += report.failed
        }
        return total as ResyncReport
      })

    /** The per-index view: counters over replicas (sum, or max under fleet scope), drift, policy. */
    const view = Effect.gen(function*() {
      yield* stats.flush
      const views: Array<IndexView> = []
      for (const index of indexes) {
        const rows = yield* store.find(SearchStats, { where: { indexName: index.name } })
        const fleet = rows.some((row) => row.fleet)
        const combine = (pick: (row: typeof SearchStats.schema.Type) => number) =>
          rows.length === 0 ? 0 : fleet ? Math.max(...rows.map(pick)) : rows.reduce((sum, row) => sum + pick(row), 0)
        const pendingDrift = yield* store.count(SearchDrift, { where: { indexName: index.name } })
        const latest = yield* store.find(SearchDrift, { where: { indexName: index.name }, orderBy: "lastFailedAt", direction: "desc", limit: 1 })
        const reindexed = rows.filter((row) => row.lastReindexAt !== null).sort((a, b) => b.lastReindexAt! - a.lastReindexAt!)[0]
        views.push({
          name: index.name,
          index: index.spec.index,
          table: index.table.name,
          backend: backend.name,
          synced: combine((row) => row.synced),
          removed: combine((row) => row.removed),
          dropped: combine((row) => row.dropped),
          pendingDrift,
          lastDriftAt: latest[0]?.lastFailedAt ?? null,
          drifted: pendingDrift > 0,
          lastReindexAt: reindexed?.lastReindexAt ?? null,
          lastReindexRows: reindexed?.lastReindexRows ?? null,
          aggregation: fleet ? "max" : "sum",
          replicas: rows.length,
          retryPolicy: { retries: sync.retries, retryBaseDelayMs: sync.retryBaseDelayMs, retryMaxDelayMs: sync.retryMaxDelayMs }
        })
      }
      return views
    })

    const reindex = Reindex.make({ backend, store, indexes, sync, rebuilding, derive, stats, record: ledger.record, withLease })

    /** Warns once when another replica serves a memory-backed index (spec 3.2). */
    const checkPeers = (singleProcess: boolean) =>
      Effect.gen(function*() {
        if (warnedPeer) return
        const now = yield* Clock.currentTimeMillis
        const rows = yield* store.find(SearchStats, {})
        const window = Math.max(sync.statsFlushIntervalMs * 3, 60_000)
        const peer = rows.some((row) => row.replica !== replica && now - row.seenAt < window)
        if (!peer && !stats.sawRemote()) return
        warnedPeer = true
        yield* Effect.logWarning(singleProcess
          ? "search: singleProcessMemoryIndex is declared, but another replica serves this app: the declaration is false and each replica's memory index differs"
          : "search: several replicas serve this app on the memory backend: each has its own index")
      }).pipe(Effect.catchAll(() => Effect.void))

    /**
     * Runs the sweep every `resyncIntervalMs`. Each sweep runs with the background fibers, so
     * `idle` also waits for a sweep in progress.
     */
    const startSweep = Effect.suspend(() =>
      sync.resyncIntervalMs <= 0 ? Effect.void : Effect.sleep(Duration.millis(sync.resyncIntervalMs)).pipe(
        Effect.zipRight(Effect.suspend(() => Fiber.join(runInBackground(
          sweep.pipe(Effect.catchAllCause((cause) => Effect.logWarning("search: repair sweep failed", cause)))
        )))),
        Effect.forever,
        Effect.interruptible,
        Effect.forkScoped,
        Effect.asVoid
      ))

    /** Waits for background retries to finish (tests, shutdown). */
    const idle = FiberSet.awaitEmpty(fibers)

    return {
      onChange,
      recordEvent,
      sweep,
      startSweep,
      resync,
      reindex,
      view,
      flushStats: stats.flush,
      checkPeers,
      idle,
      busy: rows.size,
      /** Ledger entries this replica repaired since it started. */
      repaired: (): number => repairedTotal,
      fibers
    }
  })

/** The running sync engine. */
export type Engine = Effect.Effect.Success<ReturnType<typeof make>>

/** The running state of a started search plugin: its backend and sync engine. */
export interface Running {
  readonly backend: SearchBackendShape
  readonly engine: Engine
}
/** Requirements of `make`. */
export type MakeR = Scope.Scope
