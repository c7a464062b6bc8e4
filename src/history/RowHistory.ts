/**
 * Row history (spec 2.12): a full snapshot of every committed insert, update and delete, read back
 * as all versions of a row or as the row at a past instant.
 *
 * Versions are numbered from 1 per row, gapless, in the order changes are delivered (commit order
 * within a process). Under fleet scope only the writing replica records a change. The listener is
 * durable: if a version cannot be recorded, the write that produced it fails loudly
 * (`ChangeDeliveryFailed`), its data committed but its caller told.
 */
import { Chunk, Clock, Effect, Layer, Queue, Schedule, Stream, SubscriptionRef } from "effect"
import * as Plugin from "../app/Plugin.js"
import type { ChangeEvent } from "../kernel/ChangeEvent.js"
import type { StoreError } from "../kernel/Errors.js"
import type { StoreShape } from "../kernel/Store.js"
import { Store } from "../kernel/Store.js"
import * as Table from "../kernel/Table.js"
import { RowHistory, versionId } from "./tables.js"

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

/** The row as it was at `at` (epoch ms): the latest version changed at or before `at`, or null (none yet, or deleted). */
export const rowAsOf = (
  store: StoreShape,
  table: Table.Any | string,
  id: string,
  tenantId: string | null,
  at: number
) =>
  store.find(RowHistory, {
    where: { tableName: tableName(table), rowId: id, changedAt: { lte: at }, ...(tenantId === null ? {} : { tenantId }) },
    orderBy: "version",
    direction: "desc",
    limit: 1
  }).pipe(Effect.map((records) => {
    const latest = records[0]
    return latest === undefined || latest.op === "delete" ? null : latest.data
  }))

/**
 * Records changes as their rows' next versions. The last version of recently changed rows is
 * remembered; the others are looked up with one query per table. A concurrent recorder (another
 * replica) makes the insert collide on a version id; the recorder then forgets, re-reads and retries.
 */
const makeRecorder = (options: Options) => {
  // Remembered per store: one plugin value may serve several stores (tests, several apps in a process).
  const remembered = new WeakMap<StoreShape, Map<string, number>>()
  const rememberAtMost = 50_000
  const keyOf = (table: string, id: string) => `${table}\u0000${id}`

  const lookUp = (store: StoreShape, lastVersions: Map<string, number>, events: ReadonlyArray<ChangeEvent>) =>
    Effect.gen(function*() {
      const missing = new Map<string, Set<string>>()
      for (const event of events) {
        if (lastVersions.has(keyOf(event.table, event.id))) continue
        if (!missing.has(event.table)) missing.set(event.table, new Set())
        missing.get(event.table)!.add(event.id)
      }
      for (const [table, ids] of missing) {
        const found = yield* store.find(RowHistory, { where: { tableName: table, rowId: { in: [...ids] } } })
        for (const id of ids) lastVersions.set(keyOf(table, id), 0)
        for (const record of found) {
          const key = keyOf(table, record.rowId)
          lastVersions.set(key, Math.max(lastVersions.get(key) ?? 0, record.version))
        }
      }
    })

  const attempt = (store: StoreShape, events: ReadonlyArray<ChangeEvent>) =>
    Effect.gen(function*() {
      let lastVersions = remembered.get(store)
      if (lastVersions === undefined) remembered.set(store, lastVersions = new Map())
      yield* lookUp(store, lastVersions, events)
      const next = new Map<string, number>()
      const records = events.map((event) => {
        const key = keyOf(event.table, event.id)
        const version = (next.get(key) ?? lastVersions.get(key) ?? 0) + 1
        next.set(key, version)
        const excluded = options.excludeColumns?.[event.table] ?? []
        return {
          id: versionId(event.table, event.id, version),
          tableName: event.table,
          rowId: event.id,
          version,
          op: event.op,
          data: event.after === null
            ? null
            : Object.fromEntries(Object.entries(event.after).filter(([column]) => !excluded.includes(column))),
          changedAt: event.at,
          tenantId: event.tenantId,
          traceId: event.provenance.traceId,
          subjectId: event.provenance.subjectId,
          procedure: event.provenance.procedure
        }
      })
      const write: Effect.Effect<unknown, StoreError> = records.length === 1
        ? store.insert(RowHistory, records[0]!)
        : store.insertMany(RowHistory, records)
      yield* write.pipe(Effect.tapError(() => Effect.sync(() => lastVersions.clear())))
      if (lastVersions.size + next.size >= rememberAtMost) lastVersions.clear()
      for (const [key, version] of next) lastVersions.set(key, version)
    })

  /** Records `events` (in delivery order) in one statement. */
  return (events: ReadonlyArray<ChangeEvent>): Effect.Effect<void, StoreError, Store> =>
    Effect.flatMap(Store, (store) =>
      attempt(store, events).pipe(Effect.retry({ while: (error) => error._tag === "DuplicateRow", times: 5 })))
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
  /** Completes once every change delivered so far is recorded (immediately in `sync` mode). */
  readonly drain: Effect.Effect<void>
}

/** The row history plugin. */
export const rowHistoryPlugin = (options: Options = {}): RowHistoryPlugin => {
  const recorded = (table: string) =>
    !Table.isFrameworkTable(table) &&
    (options.include === undefined || options.include.includes(table)) &&
    !(options.exclude ?? []).includes(table)
  const record = makeRecorder(options)
  const batched = options.mode === "batched"
  let batcher: Effect.Effect.Success<ReturnType<typeof makeBatcher>> | undefined
  const retention = options.keepVersions !== undefined || options.maxAgeMs !== undefined
  const background = Layer.scopedDiscard(Effect.gen(function*() {
    if (batched) batcher = yield* makeBatcher(record, options.batchSize ?? 500)
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
      onChangeEvent: (event) => {
        if (!recorded(event.table) || event.remote === true) return Effect.void
        return batcher !== undefined ? batcher.offer(event) : record([event])
      },
      recordChangeFailure: (event, cause) =>
        Effect.logError(`row history lost a version of ${event.table}/${event.id}`, cause).pipe(
          Effect.zipRight(Effect.fail("row history could not record the change"))
        ),
      ...(batched || retention ? { layer: background } : {})
    }),
    drain: Effect.suspend(() => batcher?.drain ?? Effect.void)
  }
}
