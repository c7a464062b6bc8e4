/**
 * Row history (spec 2.12): a full snapshot of every committed insert, update and delete, read back
 * as all versions of a row or as the row at a past instant.
 *
 * Versions are numbered from 1 per row, gapless. In `sync` mode (the default) a version is
 * assigned and written inside the writing transaction, under the row's lock: versions follow
 * commit order across every replica, and a write commits with its version or not at all. In
 * `batched` mode versions are recorded after commit by the writing replica, in its commit order.
 */
import { SqlClient } from "@effect/sql"
import { Chunk, Clock, Effect, Layer, Option, Queue, Schedule, Stream, SubscriptionRef } from "effect"
import * as Plugin from "../app/Plugin.js"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import { ChangeTap } from "../kernel/changes/ChangeTap.js"
import type { PendingChange } from "../kernel/changes/ChangeTap.js"
import type { StoreError } from "../kernel/Errors.js"
import type { StoreShape } from "../kernel/store/Store.js"
import { Store } from "../kernel/store/Store.js"
import * as StageStatements from "../kernel/store/StageStatements.js"
import * as Subject from "../kernel/Subject.js"
import * as TenantScope from "../kernel/store/TenantScope.js"
import * as Table from "../kernel/schema/Table.js"
import { RowHistory, versionId } from "./tables.js"
import type { Change } from "./VersionStatements.js"
import { dataOf, stageOne, versionPart } from "./VersionStatements.js"
import * as Settings from "../app/Settings.js"

/** A recorded version. `data` is the encoded row (absent for deletes). */
export interface Version {
  readonly version: number
  readonly op: "insert" | "update" | "delete"
  readonly data?: Readonly<Record<string, unknown>>
  readonly changedAt: number
  readonly tenantId: string | null
  readonly traceId: string
  readonly subjectId: string | null
  readonly procedure: string | null
}

/** Options of `rowHistoryPlugin`. */
export interface Options {
  /** Record only these tables (default: every app table). */
  readonly include?: ReadonlyArray<string>
  /** Never record these tables. */
  readonly exclude?: ReadonlyArray<string>
  /** Columns not stored, per table (noisy or secret columns). */
  readonly excludeColumns?: Readonly<Record<string, ReadonlyArray<string>>>
  /** Retention: keep at most this many versions per row (the newest). */
  readonly keepVersions?: number
  /** Retention: drop versions older than this, except each row's newest. */
  readonly maxAgeMs?: number
  /** How often the retention sweep runs (default 1 hour). */
  readonly sweepIntervalMs?: number
  /**
   * `sync` (default): a version is recorded before the write returns, and a write whose version
   * cannot be recorded fails loudly. `batched`: versions are queued and written many per statement
   * by a background fiber, for throughput; reads may lag the write until `drain`.
   */
  readonly mode?: "sync" | "batched"
  /** Most versions per statement in `batched` mode (default 500). */
  readonly batchSize?: number
}

const tableName = (table: Table.Any | string) => typeof table === "string" ? table : table.name

const toVersion = (record: typeof RowHistory.schema.Type): Version => ({
  version: record.version,
  op: record.op,
  ...(record.data === null ? {} : { data: record.data }),
  changedAt: record.changedAt,
  tenantId: record.tenantId,
  traceId: record.traceId,
  subjectId: record.subjectId,
  procedure: record.procedure
})

/** Every recorded version of a row, oldest first. A tenant id that does not own the row sees nothing. */
export const rowHistory = (
  store: StoreShape,
  table: Table.Any | string,
  id: string,
  tenantId: string | null
) =>
  store.find(RowHistory, {
    where: { tableName: tableName(table), rowId: id, ...(tenantId === null ? {} : { tenantId }) },
    orderBy: "version"
  }).pipe(Effect.map((records) => records.map(toVersion)))

/**
 * The row as it was at `at` (epoch ms): the latest version changed at or before `at`, or null (none
 * yet, or deleted). The latest version is found across tenants and then checked against the
 * caller's tenant (`tenantId`, and the acting Subject's): a row that system code moved to another
 * tenant is no longer the old tenant's from that version on.
 */
export const rowAsOf = (
  store: StoreShape,
  table: Table.Any | string,
  id: string,
  tenantId: string | null,
  at: number
) =>
  Effect.gen(function*() {
    const scope = yield* TenantScope.of(RowHistory)
    // Read unscoped: a tenant-scoped read would skip the version that moved the row away and find
    // the tenant's older one.
    const records = yield* Subject.asSystem(store.find(RowHistory, {
      where: { tableName: tableName(table), rowId: id, changedAt: { lte: at } },
      orderBy: "version",
      direction: "desc",
      limit: 1
    }))
    const latest = records[0]
    if (latest === undefined || latest.op === "delete") return null
    if (tenantId !== null && latest.tenantId !== tenantId) return null
    if (scope._tag === "Confined" && (scope.tenantId === null || latest.tenantId !== scope.tenantId)) return null
    return latest.data
  })

type VersionRecord = typeof RowHistory.schema.Type
/** A row's newest recorded version, and when it changed. */
interface Head {
  readonly version: number
  readonly changedAt: number
}

const keyOf = (table: string, id: string) => `${table}\u0000${id}`
/** Rows at most looked up one query each; beyond, the rows inserted are looked up together. */
const separateLookUps = 8

/** The newest version of a row (`undefined`: none), one indexed query. */
function* newestOf(table: string, id: string): StageStatements.Plan<Head | undefined> {
  const records = yield* StageStatements.find(RowHistory, { where: { tableName: table, rowId: id }, orderBy: "version", direction: "desc", limit: 1 })
  return records[0]
}

/**
 * The newest version of every row `changes` touch, reading no more than that: one query per row,
 * except for many rows inserted at once. A row can only be inserted while absent, so its newest
 * version, if any, is a delete: those rows are looked up in one query over their deletes, checked
 * with one query over the ids their next versions would take (history that missed a delete would
 * collide there), and only a colliding row is looked up on its own.
 */
function* headsOf(changes: ReadonlyArray<Change>): StageStatements.Plan<Map<string, Head | undefined>> {
  const heads = new Map<string, Head | undefined>()
  const inserted = new Map<string, Set<string>>()
  const separate: Array<Change> = []
  for (const change of changes) {
    const key = keyOf(change.table, change.id)
    if (heads.has(key)) continue
    heads.set(key, undefined)
    if (change.op === "insert") {
      if (!inserted.has(change.table)) inserted.set(change.table, new Set())
      inserted.get(change.table)!.add(change.id)
    } else {
      separate.push(change)
    }
  }
  const insertedCount = [...inserted.values()].reduce((n, ids) => n + ids.size, 0)
  if (separate.length + insertedCount <= separateLookUps) {
    for (const key of heads.keys()) {
      const [table, id] = key.split("\u0000") as [string, string]
      heads.set(key, yield* newestOf(table, id))
    }
    return heads
  }
  for (const change of separate) heads.set(keyOf(change.table, change.id), yield* newestOf(change.table, change.id))
  for (const [table, ids] of inserted) {
    const deletes = yield* StageStatements.find(RowHistory, { where: { tableName: table, rowId: { in: [...ids] }, op: "delete" } })
    for (const record of deletes) {
      const key = keyOf(table, record.rowId)
      const head = heads.get(key)
      if (head === undefined || head.version < record.version) heads.set(key, record)
    }
    const next = [...ids].map((id) => versionId(table, id, (heads.get(keyOf(table, id))?.version ?? 0) + 1))
    const taken = yield* StageStatements.find(RowHistory, { where: { id: { in: next } } })
    for (const record of taken) heads.set(keyOf(table, record.rowId), yield* newestOf(table, record.rowId))
  }
  return heads
}

/** The records of `changes` as the next versions after `heads` (updated as it goes). */
const recordsOf = (options: Options, changes: ReadonlyArray<Change>, heads: Map<string, Head | undefined>): Array<VersionRecord> =>
  changes.map((change) => {
    const key = keyOf(change.table, change.id)
    const head = heads.get(key)
    const version = (head?.version ?? 0) + 1
    // Versions order by number; their times never run backwards (replicas' clocks may differ).
    const changedAt = Math.max(change.at, head?.changedAt ?? change.at)
    heads.set(key, { version, changedAt })
    return {
      id: versionId(change.table, change.id, version),
      tableName: change.table,
      rowId: change.id,
      version,
      op: change.op,
      data: dataOf(options.excludeColumns, change),
      changedAt,
      tenantId: change.tenantId,
      traceId: change.provenance.traceId,
      subjectId: change.provenance.subjectId,
      procedure: change.provenance.procedure
    }
  })

const writeRecords = (store: StoreShape, records: ReadonlyArray<VersionRecord>): Effect.Effect<unknown, StoreError> =>
  records.length === 1 ? store.insert(RowHistory, records[0]!) : store.insertMany(RowHistory, records)

/**
 * `sync` mode: versions are assigned and written inside the writing transaction, after its
 * writes, which hold the changed rows' locks until commit: the row's previous writers have
 * committed their versions, and its next ones wait. Versions are gapless and in commit order
 * across replicas, and commit (or not) with the write. Written as statements, so that on SQLite
 * a one-row write and its version commit in one step (see `StageStatements`).
 */
function* stageVersions(options: Options, changes: ReadonlyArray<Change>): StageStatements.Plan<void> {
  if (changes.length === 0) return
  const heads = yield* headsOf(changes)
  yield* StageStatements.insert(RowHistory, recordsOf(options, changes, heads))
}

/**
 * `stageVersions` as the store runs it inside a client transaction. On PostgreSQL a few changes
 * take one statement each on the transaction's connection (the newest version is read in it)
 * instead of a look-up and an insert.
 */
const stageVersionsIn = (options: Options, changes: ReadonlyArray<Change>): Effect.Effect<void, StoreError, Store> =>
  Effect.gen(function*() {
    if (changes.length === 0) return
    const store = yield* Store
    if (store.dialect === "pg" && changes.length <= separateLookUps) {
      const transaction = yield* Effect.serviceOption(SqlClient.TransactionConnection)
      if (Option.isSome(transaction)) {
        for (const change of changes) yield* stageOne(transaction.value[0], options.excludeColumns, change)
        return
      }
    }
    yield* StageStatements.run(store, () => stageVersions(options, changes))
  })

/**
 * `batched` mode: records committed changes after the fact, many per statement. The newest
 * version of recently recorded rows is remembered; the others are looked up as `headsOf` does. A concurrent recorder (another replica recording the same row) makes the insert collide;
 * the recorder forgets, re-reads and retries.
 */
const makeRecorder = (options: Options) => {
  // Remembered per store: one plugin value may serve several stores (tests, several apps in a process).
  const remembered = new WeakMap<StoreShape, Map<string, Head | undefined>>()
  const rememberAtMost = 50_000

  const attempt = (store: StoreShape, events: ReadonlyArray<ChangeEvent>) =>
    Effect.gen(function*() {
      let known = remembered.get(store)
      if (known === undefined) remembered.set(store, known = new Map())
      const unknown = events.filter((event) => !known.has(keyOf(event.table, event.id)))
      // Rows not remembered are looked up together (see `headsOf`).
      const heads = unknown.length === 0 ? new Map<string, Head | undefined>() : yield* StageStatements.run(store, () => headsOf(unknown))
      for (const event of events) {
        const key = keyOf(event.table, event.id)
        if (!heads.has(key)) heads.set(key, known.get(key))
      }
      const records = recordsOf(options, events, heads)
      yield* writeRecords(store, records).pipe(Effect.tapError(() => Effect.sync(() => known.clear())))
      if (known.size + heads.size >= rememberAtMost) known.clear()
      for (const [key, head] of heads) known.set(key, head)
    })

  /** Records `events` (in delivery order) in one statement. */
  return (events: ReadonlyArray<ChangeEvent>): Effect.Effect<void, StoreError, Store> =>
    Effect.flatMap(Store, (store) =>
      attempt(store, events).pipe(Effect.retry({ while: (error) => error._tag === "DuplicateRow" })))
}

/**
 * Batched recording: changes are queued and written by one background fiber, many per statement,
 * off the writer's path. A batch that cannot be written is retried until it is (every 30 s at
 * most). `drain` waits until everything queued is recorded; closing the scope drains first, for up
 * to 30 s. A crash, or a shutdown while the database stays away, loses what is still queued.
 */
const makeBatcher = (record: ReturnType<typeof makeRecorder>, batchSize: number) =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<ChangeEvent>()
    const pending = yield* SubscriptionRef.make(0)
    const writeBatch = Effect.gen(function*() {
      const batch = Chunk.toReadonlyArray(yield* Queue.takeBetween(queue, 1, batchSize))
      // Retried until it is recorded (the app's writes have committed: dropping the batch would
      // leave a gap the version numbering hides), backing off to one attempt every 30 seconds.
      yield* record(batch).pipe(
        Effect.tapError((error) => Effect.logError("row history could not record a batch; retrying", error)),
        Effect.retry(Schedule.exponential("100 millis").pipe(Schedule.either(Schedule.spaced("30 seconds")))),
        Effect.orDie
      )
      yield* SubscriptionRef.update(pending, (n) => n - batch.length)
    })
    const drain = pending.changes.pipe(Stream.takeUntil((n) => n === 0), Stream.runDrain)
    yield* Effect.forever(writeBatch).pipe(Effect.forkScoped)
    // Shutdown waits for the queue, but not forever while the database is away.
    yield* Effect.addFinalizer(() =>
      drain.pipe(
        Effect.timeout("30 seconds"),
        Effect.catchAll(() =>
          Effect.flatMap(SubscriptionRef.get(pending), (n) => Effect.logError(`row history: shutting down with ${n} versions not recorded`))
        )
      )
    )
    return {
      offer: (event: ChangeEvent) => Effect.zipRight(SubscriptionRef.update(pending, (n) => n + 1), Queue.offer(queue, event)),
      drain
    }
  })

/** Deletes versions past the retention limits, always keeping each row's newest version. */
export const sweep = (options: Options) =>
  Effect.gen(function*() {
    const store = yield* Store
    if (options.keepVersions === undefined && options.maxAgeMs === undefined) return 0
    const cutoff = options.maxAgeMs === undefined ? undefined : (yield* Clock.currentTimeMillis) - options.maxAgeMs
    const keep = Math.max(1, options.keepVersions ?? Number.POSITIVE_INFINITY)
    let removed = 0
    let group: Array<typeof RowHistory.schema.Type> = []
    const flush = Effect.suspend(() => {
      // `group` holds one row's versions, oldest first.
      const doomed = group.filter((record, index) =>
        index < group.length - 1 && (group.length - index > keep || (cutoff !== undefined && record.changedAt < cutoff))
      )
      group = []
      removed += doomed.length
      // Another replica sweeping at the same time may have removed a version already.
      return Effect.forEach(
        doomed,
        (record) => store.delete(RowHistory, record.id).pipe(Effect.catchTag("RowNotFound", () => Effect.void)),
        { discard: true }
      )
    })
    yield* store.walk(RowHistory, { pageSize: 1000 }).pipe(
      Stream.runForEach((record) =>
        Effect.gen(function*() {
          const previous = group[group.length - 1]
          if (previous !== undefined && (previous.tableName !== record.tableName || previous.rowId !== record.rowId)) yield* flush
          group.push(record)
        })
      )
    )
    yield* flush
    return removed
  })

/** The row history plugin, with `drain` to wait for batched recording to catch up. */
export interface RowHistoryPlugin extends Plugin.Plugin {
  /** Completes once every change committed so far is recorded (in `sync` mode: at once). */
  readonly drain: Effect.Effect<void, never, ChangeTap>
}

/** The row history plugin. */
export const rowHistoryPlugin = (options: Options = {}): RowHistoryPlugin => {
  for (const key of ["keepVersions", "maxAgeMs", "sweepIntervalMs", "batchSize"] as const) {
    Settings.checkPositiveInteger(`rowHistoryPlugin.${key}`, options[key])
  }
  const recorded = (table: string) =>
    !Table.isFrameworkTable(table) &&
    (options.include === undefined || options.include.includes(table)) &&
    !(options.exclude ?? []).includes(table)
  const batched = options.mode === "batched"
  let batcher: Effect.Effect.Success<ReturnType<typeof makeBatcher>> | undefined
  const retention = options.keepVersions !== undefined || options.maxAgeMs !== undefined
  const background = Layer.scopedDiscard(Effect.gen(function*() {
    if (batched) batcher = yield* makeBatcher(makeRecorder(options), options.batchSize ?? 500)
    if (retention) {
      yield* sweep(options).pipe(
        Effect.catchAll((error) => Effect.logWarning("row history retention sweep failed", error)),
        Effect.repeat(Schedule.spaced(options.sweepIntervalMs ?? 3_600_000)),
        Effect.delay(options.sweepIntervalMs ?? 3_600_000),
        Effect.forkScoped
      )
    }
  }))
  return {
    ...Plugin.definePlugin({
      name: "history",
      permissions: ["store:write", "store:changes:read"],
      tables: [RowHistory],
      // A misspelt name in `include` would record nothing, silently.
      ...(options.include === undefined ? {} : { usesTables: options.include }),
      ...(batched
        ? {
          onChangeEvent: (event: ChangeEvent) =>
            !recorded(event.table) || event.remote === true || batcher === undefined ? Effect.void : batcher.offer(event)
        }
        : {
          onStage: (changes: ReadonlyArray<PendingChange>) =>
            stageVersionsIn(options, changes.filter((change) => recorded(change.table))),
          onStageStatements: (changes: ReadonlyArray<PendingChange>) =>
            stageVersions(options, changes.filter((change) => recorded(change.table))),
          onStageFused: (change: PendingChange) => recorded(change.table) ? versionPart(options.excludeColumns, change) : null
        }),
      ...(batched || retention ? { layer: background } : {})
    }),
    drain: Effect.flatMap(ChangeTap, (tap) => Effect.zipRight(tap.settled, Effect.suspend(() => batcher?.drain ?? Effect.void)))
  }
}
