/**
 * The sync engine of one running search plugin: applies committed changes to the backend, retries
 * transient failures with capped exponential backoff in the background, keeps the drift ledger,
 * repairs it, reindexes, and buffers the sync counters.
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
import { Clock, Duration, Effect, Either, Exit, Fiber, FiberSet, Option, Schedule, Schema, SchemaAST, Stream } from "effect"
import type { ChangeEvent } from "../kernel/ChangeEvent.js"
import type { StoreError } from "../kernel/Errors.js"
import type { StoreShape } from "../kernel/Store.js"
import { SearchBackendError } from "./Errors.js"
import type { Resolved, Sync } from "./Options.js"
import * as Pending from "./Pending.js"
import type { Document, Rebuild, SearchBackendShape } from "./SearchBackend.js"
import { driftId, SearchDrift, SearchLease, SearchStats } from "./tables.js"

/** The ledger could not be written: the change would be lost, so its write must fail loudly. */
export class LedgerWriteFailed extends Schema.TaggedError<LedgerWriteFailed>()("LedgerWriteFailed", {
  index: Schema.String,
  rowId: Schema.String,
  message: Schema.String
}) {}

/** A row whose document cannot be derived (`map` threw, or returned a wrong id or tenant). */
export class DocumentInvalid extends Schema.TaggedError<DocumentInvalid>()("DocumentInvalid", {
  index: Schema.String,
  rowId: Schema.String,
  message: Schema.String
}) {}

type SyncError = SearchBackendError | DocumentInvalid | StoreError

const isTransient = (error: SyncError) =>
  error._tag === "SearchBackendError" ? error.kind === "transient" : error._tag === "StoreUnavailable"

const describe = (error: SyncError) => error._tag === "SearchBackendError" ? `${error.operation}: ${error.message}` : error.message

/** Progress of a reindex. */
export interface ReindexProgress {
  readonly index: string
  readonly phase: "walking" | "catching-up" | "swapping" | "done"
  /** Rows written to the fresh index so far. */
  readonly done: number
  /** Rows in the table when the walk began. */
  readonly total: number
}

/** The result of a repair pass. */
export interface ResyncReport {
  readonly scanned: number
  readonly repaired: number
  readonly failed: number
}

interface Counters {
  synced: number
  removed: number
  dropped: number
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
    // Maintenance leases outlive a stalled holder by a minute at most (renewed while it works).
    const leaseMs = 60_000
    const busy = new Map<string, { dirty: boolean }>()
    const ledgerKeys = new Set<string>()
    const rebuilding = new Map<string, { readonly rebuild: Rebuild; readonly touched: Set<string> }>()
    const reindexing = new Set<string>()
    const counters = new Map<string, Counters>(indexes.map((index) => [index.name, { synced: 0, removed: 0, dropped: 0 }]))
    let buffered = 0
    let flushScheduled = false
    let sawRemote = false
    let warnedPeer = false
    let repairedTotal = 0

    // Known ledger entries: a later successful write clears its entry without a read per change.
    yield* store.walk(SearchDrift, { pageSize: 1000 }).pipe(Stream.runForEach((entry) => Effect.sync(() => ledgerKeys.add(entry.id))))
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

    const count = (index: Resolved, key: keyof Counters, n = 1) =>
      Effect.suspend(() => {
        counters.get(index.name)![key] += n
        buffered += n
        if (sync.statsFlushIntervalMs === 0) return flushStats
        if (buffered >= sync.statsFlushMaxBuffered && !flushScheduled) {
          flushScheduled = true
          return background(Effect.ensuring(flushStats, Effect.sync(() => flushScheduled = false)))
        }
        return Effect.void
      })

    /** Writes the document (or its removal) to the live index and to a fresh one being built. */
    const write = (index: Resolved, rowId: string, doc: Document | null) =>
      Effect.gen(function*() {
        const building = rebuilding.get(index.name)
        if (building !== undefined) building.touched.add(rowId)
        if (doc === null) yield* backend.remove(index.spec.index, [rowId])
        else yield* backend.upsert(index.spec.index, [doc])
        if (building !== undefined) {
          yield* (doc === null ? building.rebuild.remove([rowId]) : building.rebuild.upsert([doc]))
        }
        yield* count(index, doc === null ? "removed" : "synced")
      })

    /** Re-reads the row and writes what it is now (its document, or its removal). */
    const resyncRow = (index: Resolved, rowId: string): Effect.Effect<void, SyncError> =>
      Effect.gen(function*() {
        const row = yield* store.get(index.table, rowId)
        if (Option.isNone(row)) return yield* write(index, rowId, null)
        yield* write(index, rowId, yield* derive(index, row.value, rowId))
      })

    const ledgerFailure = (index: Resolved, rowId: string) => (error: StoreError) =>
      new LedgerWriteFailed({ index: index.name, rowId, message: error.message })

    /** Records (or updates) a ledger entry. */
    const record = (index: Resolved, rowId: string, state: "retrying" | "failed", error: SyncError, attempts: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const id = driftId(index.name, rowId)
        const existing = ledgerKeys.has(id) ? yield* store.get(SearchDrift, id) : Option.none()
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
        ledgerKeys.add(id)
      }).pipe(Effect.mapError(ledgerFailure(index, rowId)))

    const clear = (index: Resolved, rowId: string) =>
      Effect.suspend(() => {
        const id = driftId(index.name, rowId)
        if (!ledgerKeys.has(id)) return Effect.void
        return store.delete(SearchDrift, id).pipe(
          Effect.catchTag("RowNotFound", () => Effect.void),
          Effect.tap(() => Effect.sync(() => ledgerKeys.delete(id)))
        )
      })

    /** Marks a row busy and runs `body`; re-runs `resyncRow` while changes arrived meanwhile. */
    const exclusive = <A, E>(key: string, body: Effect.Effect<A, E>) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          // A retry inherits the mark `onChange` set when it scheduled it.
          const mark = busy.get(key) ?? { dirty: false }
          busy.set(key, mark)
          return mark
        }),
        () => body,
        () => Effect.sync(() => busy.delete(key))
      )

    const delay = (attempt: number, error: SyncError) => {
      const backoff = Math.min(sync.retryBaseDelayMs * 2 ** attempt, sync.retryMaxDelayMs)
      const asked = error._tag === "SearchBackendError" ? error.retryAfterMs ?? 0 : 0
      return Math.min(Math.max(backoff, asked), sync.retryMaxDelayMs)
    }

    /** The background retries of one (index, row) after a transient failure. */
    const retry = (index: Resolved, rowId: string, first: SyncError) => {
      const key = driftId(index.name, rowId)
      return exclusive(
        key,
        Effect.gen(function*() {
          const mark = busy.get(key)!
          let error = first
          let attempts = 0
          while (attempts < sync.retries && isTransient(error)) {
            yield* Effect.sleep(Duration.millis(delay(attempts, error)))
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
              yield* clear(index, rowId).pipe(Effect.catchAll((e) => Effect.logWarning(`search: could not clear ${key} from the drift ledger`, e)))
              return
            }
            const failure = outcome.cause._tag === "Fail" ? outcome.cause.error : undefined
            if (failure === undefined) return yield* Effect.failCause(outcome.cause)
            error = failure
          }
          yield* count(index, "dropped")
          yield* record(index, rowId, "failed", error, attempts).pipe(
            // The entry is already there as `retrying`: the sweep still repairs it.
            Effect.catchAll((e) => Effect.logError(`search: could not mark ${key} failed in the drift ledger`, e))
          )
        })
      ).pipe(Effect.catchAllCause((cause) => Effect.logError(`search: retry of ${key} failed unexpectedly`, cause)))
    }

    /** Handles one committed change (the plugin's `onChangeEvent`). */
    const onChange = (event: ChangeEvent): Effect.Effect<void, LedgerWriteFailed> =>
      Effect.gen(function*() {
        if (event.remote === true && !sawRemote) sawRemote = true
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
          const mark = busy.get(key)
          if (mark !== undefined) {
            // A retry or repair owns this row: it re-reads the row after its current attempt.
            mark.dirty = true
            const building = rebuilding.get(index.name)
            if (building !== undefined) building.touched.add(event.id)
            continue
          }
          const attempt = event.op === "delete" || event.after === null
            ? write(index, event.id, null)
            : Effect.flatMap(decodeRow(index, event.after, event.id), (row) =>
              Effect.flatMap(derive(index, row, event.id), (doc) => write(index, event.id, doc)))
          const outcome = yield* Effect.either(attempt)
          if (outcome._tag === "Right") {
            yield* recorded(index, clear(index, event.id).pipe(Effect.mapError(ledgerFailure(index, event.id))))
            continue
          }
          const error = outcome.left
          if (isTransient(error) && sync.retries > 0) {
            // Unrecorded, the row is left to the sweep (through the marker), not retried here.
            if (!(yield* recorded(index, record(index, event.id, "retrying", error, 1)))) continue
            // Registered before delivery returns, so the next change to this row sees it busy.
            busy.set(key, { dirty: false })
            yield* background(retry(index, event.id, error))
          } else {
            yield* count(index, "dropped")
            yield* recorded(index, record(index, event.id, "failed", error, 1))
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
        record(index, event.id, "failed", new DocumentInvalid({ index: index.name, rowId: event.id, message }), 1), { discard: true })

    /** Moves abandoned pending-sync markers to the ledger (see `Pending.adopt`). */
    const adoptAbandoned = (limit: number) =>
      !staging ? Effect.void : Effect.flatMap(Pending.adopt(store, indexes, inFlight, markers.queued, limit), (ids) =>
        Effect.sync(() => {
          for (const id of ids) ledgerKeys.add(id)
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
          if (busy.has(entry.id)) continue
          const outcome = yield* exclusive(
            entry.id,
            Effect.gen(function*() {
              const mark = busy.get(entry.id)!
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
            ledgerKeys.add(entry.id)
            yield* clear(index, entry.rowId)
          } else {
            failed++
            yield* record(index, entry.rowId, "failed", outcome.left, 1)
          }
        }
        return { scanned: entries.length, repaired, failed }
      })

    /**
     * Takes the fleet-wide lease `name` for `leaseMs` (free, lapsed, or already this replica's).
     * The read locks the row (PostgreSQL `FOR UPDATE`), and a concurrent first claim fails
     * `DuplicateRow`, so two replicas never both hold it.
     */
    const claimLease = (name: string) =>
      store.transaction(Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const current = yield* store.get(SearchLease, name, { forUpdate: true })
        const lease = { id: name, holder: replica, expiresAt: now + leaseMs }
        if (Option.isNone(current)) {
          yield* store.insert(SearchLease, lease)
          return true
        }
        if (current.value.holder !== replica && current.value.expiresAt > now) return false
        yield* store.upsert(SearchLease, lease)
        return true
      })).pipe(Effect.catchTag("DuplicateRow", () => Effect.succeed(false)))

    const releaseLease = (name: string) =>
      store.transaction(Effect.gen(function*() {
        const current = yield* store.get(SearchLease, name, { forUpdate: true })
        if (Option.isSome(current) && current.value.holder === replica) yield* store.delete(SearchLease, name)
      })).pipe(Effect.catchAll((e) => Effect.logWarning(`search: could not release the lease ${name}`, e)))

    /**
     * Runs `work` under the fleet-wide lease `name`, renewed every third of `leaseMs` while it
     * runs; `None` when another replica holds it.
     */
    const withLease = <A, E, R>(name: string, work: Effect.Effect<A, E, R>) =>
      Effect.flatMap(claimLease(name), (held) =>
        !held ? Effect.succeed(Option.none<A>()) : Effect.gen(function*() {
          const renew = yield* claimLease(name).pipe(
            Effect.catchAll(() => Effect.succeed(false)),
            Effect.repeat(Schedule.spaced(Duration.millis(leaseMs / 3))),
            Effect.delay(Duration.millis(leaseMs / 3)),
            Effect.fork
          )
          return yield* work.pipe(
            Effect.map(Option.some),
            Effect.ensuring(Effect.zipRight(Fiber.interrupt(renew), releaseLease(name)))
          )
        }))

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

    /** Adds the buffered counters to this replica's stats rows. */
    const flushLock = yield* Effect.makeSemaphore(1)
    const flushStats: Effect.Effect<void> = flushLock.withPermits(1)(Effect.gen(function*() {
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

    const setReindexed = (index: Resolved, rows: number) =>
      Effect.gen(function*() {
        yield* flushStats
        const now = yield* Clock.currentTimeMillis
        const id = driftId(index.name, replica)
        const existing = yield* store.get(SearchStats, id)
        if (Option.isSome(existing)) yield* store.upsert(SearchStats, { ...existing.value, lastReindexAt: now, lastReindexRows: rows })
      }).pipe(Effect.catchAll((e) => Effect.logWarning("search: could not record the reindex in stats", e)))

    /** The per-index view: counters over replicas (sum, or max under fleet scope), drift, policy. */
    const view = Effect.gen(function*() {
      yield* flushStats
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

    /**
     * A reindex step retried on a transient failure with the sync backoff (`retries` times): one
     * busy moment of the engine (or a SQLite writer lock held by the app's own connection) must not
     * throw away the pages written so far.
     */
    const retryTransient = <A>(step: Effect.Effect<A, SearchBackendError>) =>
      Effect.retry(step, {
        while: (error) => error.kind === "transient",
        times: sync.retries,
        schedule: Schedule.exponential(Duration.millis(sync.retryBaseDelayMs)).pipe(
          Schedule.union(Schedule.spaced(Duration.millis(sync.retryMaxDelayMs)))
        )
      })

    /**
     * Reindex: a keyset walk of the table in pages of `reindexBatchSize`, written into a fresh index
     * that is swapped in at the end, so rows deleted meanwhile leave no orphan. Changes during the
     * walk go to both indexes; rows they touched are re-read before the swap.
     */
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
        rebuilding.set(index.name, { rebuild, touched })
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
                  yield* count(index, "dropped")
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
        yield* retryTransient(rebuild.swap)
        // Anything still changing after the last pass is left to the sweep.
        for (const rowId of touched) {
          yield* record(index, rowId, "failed", new DocumentInvalid({ index: index.name, rowId, message: "changed during reindex swap" }), 0)
        }
        yield* setReindexed(index, done)
        yield* onProgress({ index: indexName, phase: "done", done, total })
        return { index: indexName, rows: done }
      }).pipe(Effect.scoped)

    /**
     * Reindex, one at a time per index across the fleet (two rebuilds of one index would also
     * build into the same fresh generation and drop each other's pages).
     */
    const reindexExclusive = (indexName: string, onProgress?: (progress: ReindexProgress) => Effect.Effect<void>) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          if (reindexing.has(indexName)) return false
          reindexing.add(indexName)
          return true
        }),
        (acquired) => acquired ? withLease(`reindex:${indexName}`, reindex(indexName, onProgress)) : Effect.succeed(Option.none()),
        (acquired) => Effect.sync(() => acquired && reindexing.delete(indexName))
      )

    /** Warns once when another replica serves a memory-backed index (spec 3.2). */
    const checkPeers = (singleProcess: boolean) =>
      Effect.gen(function*() {
        if (warnedPeer) return
        const now = yield* Clock.currentTimeMillis
        const rows = yield* store.find(SearchStats, {})
        const window = Math.max(sync.statsFlushIntervalMs * 3, 60_000)
        const peer = rows.some((row) => row.replica !== replica && now - row.seenAt < window)
        if (!peer && !sawRemote) return
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
      reindex: reindexExclusive,
      view,
      flushStats,
      checkPeers,
      idle,
      busy: (): number => busy.size,
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
