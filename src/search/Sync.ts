/**
 * The sync engine of one running search plugin: applies committed changes to the backend in
 * batches (the listener and the lanes), retries transient failures in the background (`Backoff`)
 * in per-row order (`RowOrder`), keeps and repairs the drift ledger (`Ledger`, the sweep under a
 * fleet-wide `Lease`), reindexes (`Reindex`), buffers the sync counters (`Stats`), and reports
 * the lag (`backlog`, `lagMs`, as gauges too).
 *
 * Batches: the change tap delivers one change at a time in commit order, on the plugin's own
 * listener fiber (off the writer's path: a write never waits for the engine). Each change joins
 * the lane of each index of its table (`Lane`: coalesced per row to its latest state), and the lane
 * sends what waits in one engine request (`Batch`), up to `batchesInFlight` at once, each
 * acknowledged when the engine's task succeeded. A row in a batch in flight is held back, so a
 * row's later write never overtakes its earlier one. A (index, row) whose write is being retried
 * or repaired is "busy": later changes to it are not sent but mark it dirty, and the retry re-reads
 * the row from the database (the failed event is never replayed).
 *
 * Durability: every change to an indexed table committed with a pending-sync marker (see
 * `Pending`), so a change is never committed without a durable record that it must reach the index.
 * A failure is written to `_fw_search_drift` (a transient one as `retrying`, so a crash during the
 * backoff still leaves it to the sweep) before the marker is cleared; when that ledger write fails,
 * the marker stays, the row is logged at error level with its trace and counted `unprotected`, and
 * the sweep repairs the row later.
 */
import type { Scope } from "effect"
import { Clock, Deferred, Duration, Effect, Either, Exit, Fiber, FiberId, FiberSet, Metric, Option, Schema, SchemaAST } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as LogText from "../kernel/LogText.js"
import * as Backoff from "./Backoff.js"
import * as Batch from "./Batch.js"
import * as Lane from "./Lane.js"
import * as Lease from "./Lease.js"
import * as Ledger from "./Ledger.js"
import type { Resolved, Sync } from "./Options.js"
import * as Pending from "./Pending.js"
import * as Reindex from "./Reindex.js"
import * as RowOrder from "./RowOrder.js"
import type { Document, SearchBackendShape, WriteOp } from "./SearchBackend.js"
import * as Stats from "./Stats.js"
import { DocumentInvalid, isTransient } from "./SyncError.js"
import type { LedgerWriteFailed, SyncError } from "./SyncError.js"
import { driftId, SearchDrift, SearchPending, SearchStats } from "./tables.js"

export type { ReindexProgress } from "./Reindex.js"

/** The committed changes of an index not yet in the engine (a gauge per index, tagged `index`). */
export const backlogGauge = Metric.gauge("fw_search_backlog", { description: "committed changes not yet in the search index" })
/** Age of the oldest of them in ms (a gauge per index, tagged `index`). */
export const lagGauge = Metric.gauge("fw_search_lag_ms", { description: "age of the oldest committed change not yet in the search index (ms)" })

/** How long the lanes may take to drain when the plugin stops. */
const drainOnCloseMs = 10_000

/** Sleeps on the real timer: a shutdown bound must hold under a test clock too. */
const realSleep = (ms: number) =>
  Effect.async<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

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
  /**
   * Committed changes not in the engine yet: drift ledger entries plus pending-sync markers (or,
   * on the memory store tier, this process's queue and batches in flight). 0 only when the index
   * has every committed change.
   */
  readonly backlog: number
  /** Age of the oldest change counted in `backlog` (ms); 0 when there is none. */
  readonly lagMs: number
  /** Equal to `backlog`: never 0 while a committed change is not indexed. */
  readonly pendingDrift: number
  /** Entries of the drift ledger (failures waiting for repair). */
  readonly ledgerEntries: number
  /** Changes whose failure could not be recorded in the ledger (waiting for the sweep through their marker, if any). */
  readonly unprotected: number
  readonly lastDriftAt: number | null
  /** A failure needs repair: ledger entries or unprotected changes. */
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
    const lanes = new Map(indexes.map((index) => [index.name, new Lane.Lane(index)]))
    /** Markers of changes still held by a lane: how many lanes hold each, and whether all recorded it. */
    const refs = new Map<string, { left: number; ok: boolean }>()
    /** Markers kept because a ledger write failed (their rows wait for the sweep). */
    const keptRefs = new Set<string>()

    /** The document of a row, checked: its id is the row's, its tenant the row's. */
    const deriveNow = (index: Resolved, row: unknown, rowId: string): Either.Either<Document, DocumentInvalid> => {
      const invalid = (message: string) => Either.left(new DocumentInvalid({ index: index.name, rowId, message }))
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
      return Either.right(doc)
    }
    const derive = (index: Resolved, row: unknown, rowId: string): Effect.Effect<Document, DocumentInvalid> =>
      Effect.suspend(() => deriveNow(index, row, rowId))

    /**
     * The operation that brings the index to `row` (null: the row is gone), and the failure when
     * its document cannot be derived: then the row's previous document (if it may have one) is
     * removed, since left in the index it would still answer as the row (after a move to another
     * tenant, to the tenant that no longer owns it).
     */
    const opOf = (index: Resolved, rowId: string, row: unknown | null, previous: boolean): { readonly op: WriteOp | undefined; readonly invalid?: DocumentInvalid } => {
      if (row === null) return { op: { id: rowId, doc: null } }
      const doc = deriveNow(index, row, rowId)
      if (doc._tag === "Right") return { op: { id: rowId, doc: doc.right } }
      return { op: previous ? { id: rowId, doc: null } : undefined, invalid: doc.left }
    }

    const liveTarget = (index: Resolved): Batch.Target => ({
      write: backend.write === undefined ? undefined : (ops) => backend.write!(index.spec.index, ops),
      upsert: (docs) => backend.upsert(index.spec.index, docs),
      remove: (ids) => backend.remove(index.spec.index, ids)
    })

    /**
     * Writes `ops` to the live index and, during a reindex, copies what landed into the fresh one
     * (unless its swap began: see `Reindex.copy`). A failed copy is harmless: the rows are in
     * `touched`, so the reindex re-reads them before its swap or leaves them to the sweep after it.
     * Answers the refused operations; fails on a transient failure of the request.
     */
    const send = (index: Resolved, ops: ReadonlyArray<WriteOp>) =>
      Effect.gen(function*() {
        const building = rebuilding.get(index.name)
        if (building !== undefined) for (const op of ops) building.touched.add(op.id)
        const refused = yield* Batch.write(liveTarget(index), ops)
        const failed = new Set(refused.map((r) => r.id))
        let synced = 0
        let removed = 0
        const landed: Array<WriteOp> = []
        for (const op of ops) {
          if (failed.has(op.id)) continue
          landed.push(op)
          if (op.doc === null) removed++
          else synced++
        }
        if (building !== undefined && landed.length > 0) {
          yield* Reindex.copy(building, (rebuild) => Batch.write({ upsert: rebuild.upsert, remove: rebuild.remove }, landed)).pipe(
            Effect.catchAll((error) => Effect.logWarning(`search: could not copy ${landed.length} change(s) into the index being rebuilt for ${index.name}; the reindex re-reads them`, error))
          )
        }
        if (synced > 0) yield* stats.count(index, "synced", synced)
        if (removed > 0) yield* stats.count(index, "removed", removed)
        return refused
      })

    /** Writes the document of a row (or its removal), failing as one row's write (repair). */
    const write = (index: Resolved, rowId: string, doc: Document | null) =>
      Effect.flatMap(send(index, [{ id: rowId, doc }]), (refused) => refused.length === 0 ? Effect.void : Effect.fail(refused[0]!.error))

    /** Re-reads the row and writes what it is now (its document, or its removal). */
    const resyncRow = (index: Resolved, rowId: string): Effect.Effect<void, SyncError> =>
      Effect.gen(function*() {
        const row = yield* store.get(index.table, rowId)
        const { invalid, op } = opOf(index, rowId, Option.getOrNull(row), true)
        if (op !== undefined) yield* write(index, rowId, op.doc)
        if (invalid !== undefined) return yield* Effect.fail(invalid)
      })

    /**
     * Re-reads rows and writes what they are now, in one batch: the rows that failed permanently
     * (refused, or no document), or a transient failure of the whole batch.
     */
    const resyncRows = (index: Resolved, rowIds: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const found = new Map<string, unknown>()
        for (let i = 0; i < rowIds.length; i += 1000) {
          const rowsNow = yield* store.find(index.table, { where: { id: { in: rowIds.slice(i, i + 1000) } } })
          for (const row of rowsNow) found.set((row as { readonly id: string }).id, row)
        }
        const ops: Array<WriteOp> = []
        const failed: Array<{ readonly id: string; readonly error: SyncError }> = []
        for (const rowId of rowIds) {
          const { invalid, op } = opOf(index, rowId, found.get(rowId) ?? null, true)
          if (op !== undefined) ops.push(op)
          if (invalid !== undefined) failed.push({ id: rowId, error: invalid })
        }
        const refused = yield* send(index, ops)
        return [...failed, ...refused.filter((r) => !failed.some((f) => f.id === r.id))]
      })

    /** A marker's change left one lane: cleared once every lane settled it and all recorded their failures. */
    const release = (ref: string, ok: boolean): Effect.Effect<void> =>
      Effect.suspend(() => {
        const entry = refs.get(ref)
        if (entry === undefined) return Effect.void
        entry.left--
        if (!ok) entry.ok = false
        if (entry.left > 0) return Effect.void
        refs.delete(ref)
        inFlight.delete(ref)
        if (entry.ok) return markers.clear(ref)
        keptRefs.add(ref)
        return Effect.void
      })
    const releaseAll = (queued: Lane.Queued, ok: boolean) =>
      queued.refs.length === 0 ? Effect.void : Effect.forEach(queued.refs, (ref) => release(ref, ok), { discard: true })

    /**
     * Records a row's failure in the ledger. When the ledger cannot be written, the change is
     * committed and not indexed, and nothing but its pending-sync marker (none on the memory tier)
     * remembers it: said at error level with the trace, and counted as unprotected drift at once.
     */
    const recordFailure = (lane: Lane.Lane, queued: Lane.Queued, state: "retrying" | "failed", error: SyncError, attempts: number) =>
      Effect.flatMap(Effect.either(ledger.record(lane.index, queued.rowId, state, error, attempts)), (outcome) =>
        Effect.gen(function*() {
          if (outcome._tag === "Right") {
            lane.unprotected.delete(queued.rowId)
            return true
          }
          lane.unprotected.add(queued.rowId)
          const kept = queued.refs.length > 0
          yield* Effect.logError(
            `search: could not write the drift ledger for ${lane.index.name} row ${LogText.quote(queued.rowId)} (trace ${queued.event.provenance.traceId}): ` +
              (kept
                ? `the change is committed but not indexed, and unprotected until the repair sweep adopts its pending-sync marker (after ${Pending.abandonedAfterMs / 1000} s, at the next sweep)`
                : "the change is committed but not indexed, and nothing records it: a later change of the row or a reindex repairs it"),
            outcome.left
          )
          return false
        }))

    /** Takes the next batch of `lane`: waiting rows not in flight, up to the caps; busy rows go to their retry. */
    const take = (lane: Lane.Lane) => {
      const changes: Array<Lane.Queued> = []
      const ops: Array<WriteOp> = []
      const invalid = new Map<string, DocumentInvalid>()
      const skipped: Array<Lane.Queued> = []
      let bytes = 0
      for (const queued of lane.queue.values()) {
        if (changes.length >= sync.batchMaxDocuments) break
        if (lane.sending.has(queued.rowId)) continue
        const mark = rows.get(driftId(lane.index.name, queued.rowId))
        if (mark !== undefined) {
          // A retry or repair owns this row: it re-reads the row after its current attempt.
          mark.dirty = true
          lane.queue.delete(queued.rowId)
          skipped.push(queued)
          continue
        }
        const event = queued.event
        let row: unknown | null = null
        let decodeFailure: DocumentInvalid | undefined
        if (event.op !== "delete" && event.after !== null) {
          const decoded = decoders.get(lane.index.name)!(event.after)
          if (decoded._tag === "Right") row = decoded.right
          else decodeFailure = new DocumentInvalid({ index: lane.index.name, rowId: queued.rowId, message: "the changed row does not decode" })
        }
        const derived = decodeFailure === undefined
          ? opOf(lane.index, queued.rowId, row, queued.previous)
          : { op: queued.previous ? { id: queued.rowId, doc: null } : undefined, invalid: decodeFailure }
        const size = derived.op === undefined ? 0 : Batch.sizeOf(derived.op)
        if (changes.length > 0 && bytes + size > sync.batchMaxBytes) break
        bytes += size
        lane.queue.delete(queued.rowId)
        lane.sending.set(queued.rowId, queued.since)
        changes.push(queued)
        if (derived.op !== undefined) ops.push(derived.op)
        if (derived.invalid !== undefined) invalid.set(queued.rowId, derived.invalid)
      }
      return { changes, ops, invalid, skipped }
    }

    /** Sends batches of `lane` while it has waiting rows and room in flight. */
    const kick = (lane: Lane.Lane): Effect.Effect<void> =>
      Effect.suspend(() => {
        const work: Array<Effect.Effect<void>> = []
        while (lane.batches < sync.batchesInFlight) {
          const batch = take(lane)
          for (const queued of batch.skipped) work.push(releaseAll(queued, true))
          if (batch.changes.length === 0) break
          lane.batches++
          work.push(background(runBatch(lane, batch)))
        }
        if (lane.idle()) work.push(Effect.sync(wake))
        return work.length === 0 ? Effect.void : Effect.all(work, { discard: true })
      })

    /** One batch: sent, then each row acknowledged, recorded as failed, or handed to a retry. */
    const runBatch = (lane: Lane.Lane, batch: ReturnType<typeof take>) =>
      Effect.gen(function*() {
        const index = lane.index
        const outcome = yield* Effect.either(send(index, batch.ops))
        if (outcome._tag === "Left") return yield* failBatch(lane, batch, outcome.left)
        const refused = new Map<string, SyncError>(outcome.right.map((r) => [r.id, r.error]))
        for (const queued of batch.changes) {
          const error = batch.invalid.get(queued.rowId) ?? refused.get(queued.rowId)
          if (error === undefined) {
            lane.unprotected.delete(queued.rowId)
            const cleared = yield* Effect.either(ledger.clear(index, queued.rowId))
            if (cleared._tag === "Left") yield* Effect.logWarning(`search: could not clear ${LogText.quote(driftId(index.name, queued.rowId))} from the drift ledger`, cleared.left)
            yield* releaseAll(queued, true)
          } else {
            yield* stats.count(index, "dropped")
            yield* releaseAll(queued, yield* recordFailure(lane, queued, "failed", error, 1))
          }
        }
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logError(`search: a sync batch of ${lane.index.name} failed unexpectedly`, cause)),
        Effect.ensuring(Effect.suspend(() => {
          for (const queued of batch.changes) lane.sending.delete(queued.rowId)
          lane.batches--
          return kick(lane)
        }))
      )

    /**
     * A transient failure of a whole batch (spec 2.2): each row's entry is written to the ledger
     * as `retrying` first (so a crash during the backoff still leaves it to the sweep), then the
     * rows are retried together in the background, re-read from the database at each attempt.
     */
    const failBatch = (lane: Lane.Lane, batch: ReturnType<typeof take>, error: SyncError) =>
      Effect.gen(function*() {
        const retried: Array<string> = []
        for (const queued of batch.changes) {
          const invalid = batch.invalid.get(queued.rowId)
          if (invalid !== undefined || sync.retries === 0) {
            yield* stats.count(lane.index, "dropped")
            yield* releaseAll(queued, yield* recordFailure(lane, queued, "failed", invalid ?? error, 1))
            continue
          }
          const recorded = yield* recordFailure(lane, queued, "retrying", error, 1)
          // Unrecorded, the row is left to the sweep (through its marker), not retried here.
          if (recorded) retried.push(queued.rowId)
          yield* releaseAll(queued, recorded)
        }
        if (retried.length === 0) return
        // Claimed before the batch leaves the lane, so the row's next change sees it busy.
        for (const rowId of retried) rows.claim(driftId(lane.index.name, rowId))
        yield* background(retryRows(lane, retried, error))
      })

    /** The background retries of rows whose batch failed transiently (busy until they end). */
    const retryRows = (lane: Lane.Lane, rowIds: ReadonlyArray<string>, first: SyncError) => {
      const index = lane.index
      const keys = rowIds.map((rowId) => driftId(index.name, rowId))
      const markOf = (rowId: string) => rows.get(driftId(index.name, rowId)) ?? { dirty: false }
      return Effect.gen(function*() {
        let error = first
        let attempts = 0
        let pendingRows = [...rowIds]
        while (attempts < sync.retries && isTransient(error)) {
          yield* Effect.sleep(Duration.millis(Backoff.delay(sync, attempts, error)))
          attempts++
          for (const rowId of pendingRows) markOf(rowId).dirty = false
          const outcome = yield* Effect.either(resyncRows(index, pendingRows))
          if (outcome._tag === "Left") {
            error = outcome.left
            continue
          }
          let failed = outcome.right
          // Changes skipped meanwhile: those rows are re-read until they stop changing.
          for (let dirty = pendingRows.filter((rowId) => markOf(rowId).dirty); dirty.length > 0; dirty = dirty.filter((rowId) => markOf(rowId).dirty)) {
            for (const rowId of dirty) markOf(rowId).dirty = false
            const again = yield* Effect.either(resyncRows(index, dirty))
            if (again._tag === "Left") break
            failed = [...failed.filter((f) => !dirty.includes(f.id)), ...again.right]
          }
          const failedIds = new Set(failed.map((f) => f.id))
          for (const rowId of pendingRows) {
            if (failedIds.has(rowId)) continue
            yield* ledger.clear(index, rowId).pipe(Effect.catchAll((e) => Effect.logWarning(`search: could not clear ${LogText.quote(driftId(index.name, rowId))} from the drift ledger`, e)))
          }
          for (const { error: rowError, id } of failed) {
            yield* stats.count(index, "dropped")
            yield* ledger.record(index, id, "failed", rowError, attempts).pipe(
              Effect.catchAll((e) => Effect.logError(`search: could not mark ${LogText.quote(driftId(index.name, id))} failed in the drift ledger`, e))
            )
          }
          pendingRows = []
          break
        }
        for (const rowId of pendingRows) {
          yield* stats.count(index, "dropped")
          yield* ledger.record(index, rowId, "failed", error, attempts).pipe(
            // The entry is already there as `retrying`: the sweep still repairs it.
            Effect.catchAll((e) => Effect.logError(`search: could not mark ${LogText.quote(driftId(index.name, rowId))} failed in the drift ledger`, e))
          )
        }
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logError(`search: retry of ${rowIds.length} row(s) of ${index.name} failed unexpectedly`, cause)),
        Effect.ensuring(Effect.sync(() => {
          for (const key of keys) rows.release(key)
        }))
      )
    }

    /** Waiters of `drained`, woken once every lane is idle. */
    let waiters: Array<Deferred.Deferred<void>> = []
    const allIdle = () => {
      for (const lane of lanes.values()) if (!lane.idle()) return false
      return true
    }
    function wake() {
      if (waiters.length === 0 || !allIdle()) return
      for (const waiter of waiters) Deferred.unsafeDone(waiter, Exit.void)
      waiters = []
    }
    /** Completes once every change handed to the listener so far is acknowledged, recorded, or with its retry. */
    const drained: Effect.Effect<void> = Effect.suspend(() => {
      if (allIdle()) return markers.idle
      const waiter = Deferred.unsafeMake<void>(FiberId.none)
      waiters.push(waiter)
      return Effect.zipRight(Deferred.await(waiter), markers.idle)
    })

    /**
     * Handles one committed change (the plugin's `onChangeEvent`): queued in the lane of each
     * index of its table, and sent with the lane's next batch (at once when the lane has room).
     */
    const onChange = (event: ChangeEvent): Effect.Effect<void, LedgerWriteFailed> =>
      Effect.suspend(() => {
        if (event.remote === true) stats.noteRemote()
        const targets = byTable.get(event.table)
        if (targets === undefined) return Effect.void
        // Markers exist only on the SQL tiers (see `Pending.stage`).
        const ref = staging ? event.ref : undefined
        if (ref !== undefined) refs.set(ref, { left: targets.length, ok: true })
        const work: Array<Effect.Effect<void>> = []
        for (const index of targets) {
          const mark = rows.get(driftId(index.name, event.id))
          if (mark !== undefined) {
            // A retry or repair owns this row: it re-reads the row after its current attempt.
            mark.dirty = true
            const building = rebuilding.get(index.name)
            if (building !== undefined) building.touched.add(event.id)
            if (ref !== undefined) work.push(release(ref, true))
            continue
          }
          const lane = lanes.get(index.name)!
          lane.offer(event, ref)
          work.push(kick(lane))
        }
        return work.length === 1 ? work[0]! : Effect.all(work, { discard: true })
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
          // Adopted markers are in the ledger now: protected again (kept refs are pruned by `lagOf`).
          for (const lane of lanes.values()) {
            for (const rowId of lane.unprotected) if (ids.includes(driftId(lane.index.name, rowId))) lane.unprotected.delete(rowId)
          }
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
          // Busy with a retry, or in a batch being sent: the next sweep sees it.
          if (rows.get(entry.id) !== undefined || lanes.get(index.name)!.sending.has(entry.rowId)) continue
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
            lanes.get(index.name)!.unprotected.delete(entry.rowId)
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

    /**
     * The lag of an index (issue 37): committed changes not in the engine yet, counted where they
     * are — drift ledger entries, plus pending-sync markers (SQL tiers: every replica's unsettled
     * changes of the table) or, without markers, this process's queue and batches in flight — and
     * the age of the oldest of them.
     */
    const lagOf = (index: Resolved) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const lane = lanes.get(index.name)!
        const local = lane.pending()
        // A ledger that cannot be read counts as empty here: its rows still count through their markers (and as unprotected).
        const ledgerEntries = yield* store.count(SearchDrift, { where: { indexName: index.name } }).pipe(Effect.orElseSucceed(() => 0))
        const oldestEntry = ledgerEntries === 0 ? [] : yield* store.find(SearchDrift, { where: { indexName: index.name }, orderBy: "firstFailedAt", limit: 1 })
        let markers = 0
        let oldestMarker: number | null = null
        if (staging) {
          markers = yield* store.count(SearchPending, { where: { tableName: index.table.name } })
          if (markers > 0) {
            const [first] = yield* store.find(SearchPending, { where: { tableName: index.table.name }, orderBy: "stagedAt", limit: 1 })
            oldestMarker = first?.stagedAt ?? null
          }
        }
        // Markers cover this process's queue (its changes staged them); remote changes have theirs elsewhere.
        const backlog = ledgerEntries + Math.max(markers, local.count)
        const oldest = [oldestEntry[0]?.firstFailedAt ?? null, oldestMarker, local.oldest].filter((at): at is number => at !== null)
        const lagMs = backlog === 0 || oldest.length === 0 ? 0 : Math.max(0, now - Math.min(...oldest))
        // Kept markers of rows whose ledger write failed, still waiting for the sweep.
        let unprotected = lane.unprotected.size
        if (staging && keptRefs.size > 0) {
          const kept = yield* store.find(SearchPending, { where: { id: { in: [...keptRefs].slice(0, 1000) } } })
          const alive = new Set(kept.map((marker) => marker.id))
          for (const ref of keptRefs) if (!alive.has(ref)) keptRefs.delete(ref)
          unprotected = Math.max(unprotected, kept.filter((marker) => marker.tableName === index.table.name).length)
        }
        yield* Metric.set(Metric.tagged(backlogGauge, "index", index.name), backlog)
        yield* Metric.set(Metric.tagged(lagGauge, "index", index.name), lagMs)
        return { backlog, lagMs, ledgerEntries, unprotected }
      })

    /** Refreshes the lag gauges of every index (the stats loop runs it). */
    const publishLag = Effect.forEach(indexes, (index) => Effect.ignore(lagOf(index)), { discard: true })

    /** The per-index view: counters over replicas (sum, or max under fleet scope), lag, drift, policy. */
    const view = Effect.gen(function*() {
      yield* stats.flush
      const views: Array<IndexView> = []
      for (const index of indexes) {
        const rows = yield* store.find(SearchStats, { where: { indexName: index.name } })
        const fleet = rows.some((row) => row.fleet)
        const combine = (pick: (row: typeof SearchStats.schema.Type) => number) =>
          rows.length === 0 ? 0 : fleet ? Math.max(...rows.map(pick)) : rows.reduce((sum, row) => sum + pick(row), 0)
        const lag = yield* lagOf(index)
        const latest = yield* store.find(SearchDrift, { where: { indexName: index.name }, orderBy: "lastFailedAt", direction: "desc", limit: 1 }).pipe(Effect.orElseSucceed(() => []))
        const reindexed = rows.filter((row) => row.lastReindexAt !== null).sort((a, b) => b.lastReindexAt! - a.lastReindexAt!)[0]
        views.push({
          name: index.name,
          index: index.spec.index,
          table: index.table.name,
          backend: backend.name,
          synced: combine((row) => row.synced),
          removed: combine((row) => row.removed),
          dropped: combine((row) => row.dropped),
          backlog: lag.backlog,
          lagMs: lag.lagMs,
          pendingDrift: lag.backlog,
          ledgerEntries: lag.ledgerEntries,
          unprotected: lag.unprotected,
          lastDriftAt: latest[0]?.lastFailedAt ?? null,
          drifted: lag.ledgerEntries > 0 || lag.unprotected > 0,
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

    // At shutdown, what was handed to the lanes is still sent, for a while (before the fibers stop).
    yield* Effect.addFinalizer(() => Effect.interruptible(Effect.race(drained, realSleep(drainOnCloseMs))))

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
      drained,
      publishLag,
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
