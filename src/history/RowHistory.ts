/**
 * Row history (spec 2.12): a full snapshot of every committed insert, update and delete, read back
 * as all versions of a row or as the row at a past instant.
 *
 * Versions are numbered from 1 per row, gapless, in the order changes are delivered (commit order
 * within a process). Under fleet scope only the writing replica records a change. The listener is
 * durable: if a version cannot be recorded, the write that produced it fails loudly
 * (`ChangeDeliveryFailed`), its data committed but its caller told.
 */
import { Clock, Effect, Layer, Schedule, Stream } from "effect"
import * as Plugin from "../app/Plugin.js"
import type { ChangeEvent } from "../kernel/ChangeEvent.js"
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
 * Records one change as the row's next version. The last version of recently changed rows is
 * remembered, so a version costs one insert; a concurrent recorder (another replica) makes the
 * insert collide on the version id, and the recorder re-reads and retries.
 */
const record = (options: Options) => {
  const lastVersions = new Map<string, number>()
  const rememberAtMost = 50_000
  return (event: ChangeEvent) =>
    Effect.gen(function*() {
      const store = yield* Store
      const key = `${event.table}\u0000${event.id}`
      const excluded = options.excludeColumns?.[event.table] ?? []
      const data = event.after === null
        ? null
        : Object.fromEntries(Object.entries(event.after).filter(([column]) => !excluded.includes(column)))
      const latest = Effect.suspend(() => {
        const known = lastVersions.get(key)
        return known !== undefined
          ? Effect.succeed(known)
          : Effect.map(
            store.find(RowHistory, { where: { tableName: event.table, rowId: event.id }, orderBy: "version", direction: "desc", limit: 1 }),
            ([last]) => last?.version ?? 0
          )
      })
      const next = Effect.gen(function*() {
        const version = (yield* latest) + 1
        yield* store.insert(RowHistory, {
          id: versionId(event.table, event.id, version),
          tableName: event.table,
          rowId: event.id,
          version,
          op: event.op,
          data,
          changedAt: event.at,
          tenantId: event.tenantId,
          traceId: event.provenance.traceId,
          subjectId: event.provenance.subjectId,
          procedure: event.provenance.procedure
        }).pipe(Effect.tapError(() => Effect.sync(() => lastVersions.delete(key))))
        if (lastVersions.size >= rememberAtMost) lastVersions.clear()
        lastVersions.set(key, version)
      })
      yield* next.pipe(Effect.retry({ while: (error) => error._tag === "DuplicateRow", times: 5 }))
    })
}

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
      return Effect.forEach(doomed, (record) => store.delete(RowHistory, record.id), { discard: true })
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

/** The row history plugin. */
export const rowHistoryPlugin = (options: Options = {}): Plugin.Plugin => {
  const recorded = (table: string) =>
    !Table.isFrameworkTable(table) &&
    (options.include === undefined || options.include.includes(table)) &&
    !(options.exclude ?? []).includes(table)
  const onChange = record(options)
  const retention = options.keepVersions !== undefined || options.maxAgeMs !== undefined
  return Plugin.definePlugin({
    name: "history",
    permissions: ["store:write", "store:changes:read"],
    tables: [RowHistory],
    onChangeEvent: (event) => recorded(event.table) && event.remote !== true ? onChange(event) : Effect.void,
    recordChangeFailure: (event, cause) =>
      Effect.logError(`row history lost a version of ${event.table}/${event.id}`, cause).pipe(
        Effect.zipRight(Effect.fail("row history could not record the change"))
      ),
    ...(retention
      ? {
        layer: Layer.scopedDiscard(
          sweep(options).pipe(
            Effect.catchAll((error) => Effect.logWarning("row history retention sweep failed", error)),
            Effect.repeat(Schedule.spaced(options.sweepIntervalMs ?? 3_600_000)),
            Effect.delay(options.sweepIntervalMs ?? 3_600_000),
            Effect.forkScoped
          )
        )
      }
      : {})
  })
}

