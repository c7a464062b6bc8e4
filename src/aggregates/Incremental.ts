/**
 * Incremental maintenance (spec 3.7).
 *
 * SQL tiers: database triggers apply each row's delta within the statement that writes it (see
 * `Triggers`); this module resolves the shape and performs the full rebuild.
 *
 * Memory tier: each transaction's inserts, updates and deletes of the source table adjust the
 * state of their groups *inside the writing transaction* (a before-commit stager of the ChangeTap),
 * so the state commits exactly once with the write: nothing is replayed, so nothing is counted
 * twice. count, sum and avg add per group (avg keeps a hidden sum and count); min and max take a
 * value that beats the extreme directly, and removing or worsening the current extreme rescans
 * that one group.
 *
 * A full rebuild (boot of a new aggregate, `bootRefresh: async`, a manual or scheduled refresh)
 * recomputes every group while writers are held off (SQL: one `GROUP BY` with the source locked,
 * PostgreSQL `SHARE ROW EXCLUSIVE`, SQLite has one writer; memory: inside a store transaction), so
 * no delta falls between the scan and the swap.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Stream } from "effect"
import type { PendingChange } from "../kernel/changes/ChangeTap.js"
import * as Columns from "../kernel/schema/Columns.js"
import type { StoreUnavailable } from "../kernel/Errors.js"
import type { StoreShape } from "../kernel/store/Store.js"
import { unavailable } from "../kernel/drivers/sql/SqlDriver.js"
import * as Subject from "../kernel/Subject.js"
import type * as Table from "../kernel/schema/Table.js"
import type * as Aggregate from "./Aggregate.js"
import { AggregateDefinitionError } from "./Errors.js"
import type { GroupState, MemoryStorageShape, StorageShape } from "./Storage.js"
import * as Triggers from "./Triggers.js"

/** A resolved incremental shape: the source table is known. */
export interface Shape {
  readonly name: string
  readonly table: Table.Any
  readonly op: Aggregate.Op
  readonly column: string | undefined
  readonly groupBy: ReadonlyArray<string>
  readonly kinds: ReadonlyMap<string, Columns.Kind>
}

/** Resolves an aggregate's incremental shape against the app's tables; refuses what cannot be maintained. */
export const resolve = (aggregate: Aggregate.Any, tables: ReadonlyArray<Table.Any>): Shape => {
  const shape = aggregate.incremental!
  const table = tables.find((t) => t.name === shape.source) ?? shape.table
  const refuse = (why: string) => new AggregateDefinitionError(`aggregate "${aggregate.name}": incremental shape is not maintainable: ${why}`)
  if (table === undefined) throw refuse(`source "${shape.source}" is not one of the app's tables`)
  const kinds = new Map(Columns.of(table).map((c) => [c.name, c.kind]))
  for (const column of shape.groupBy) {
    const kind = kinds.get(column)
    if (kind === undefined) throw refuse(`groupBy column "${column}" is not a column of "${table.name}"`)
    if (kind === "json") throw refuse(`groupBy column "${column}" must be a string, number or boolean column`)
  }
  if (shape.column !== undefined) {
    const kind = kinds.get(shape.column)
    if (kind === undefined) throw refuse(`column "${shape.column}" is not a column of "${table.name}"`)
    if (kind !== "number" && shape.op !== "count") throw refuse(`column "${shape.column}" must be a number column for ${shape.op}`)
  }
  return { name: aggregate.name, table, op: shape.op, column: shape.column, groupBy: shape.groupBy, kinds }
}

const normal = (kind: Columns.Kind | undefined, value: unknown): unknown => {
  if (value === undefined || value === null) return null
  if (kind === "boolean") return value === true || value === 1 || value === "1" || value === "t"
  if (kind === "number") return Number(value)
  return value
}

/** A group's identity: its key (JSON of the values) and the values by column. */
export const groupOf = (shape: Shape, row: Readonly<Record<string, unknown>>) => {
  const values = shape.groupBy.map((column) => normal(shape.kinds.get(column), row[column]))
  return {
    key: JSON.stringify(values),
    group: Object.fromEntries(shape.groupBy.map((column, i) => [column, values[i]])) as Readonly<Record<string, unknown>>
  }
}

const valueOf = (shape: Shape, row: Readonly<Record<string, unknown>>): number | null => {
  if (shape.column === undefined) return null
  const value = row[shape.column]
  return typeof value === "number" && Number.isFinite(value) ? value : null
}

/** A group as stored by the database (SQLite keeps booleans as 0/1), in the app's types. */
export const normalGroup = (shape: Shape, group: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> =>
  Object.fromEntries(shape.groupBy.map((column) => [column, normal(shape.kinds.get(column), group[column])]))

/** The maintained value of a group, as `toRow` receives it. */
export const valueOfGroup = (op: Aggregate.Op, state: GroupState): number | null => {
  switch (op) {
    case "count":
      return state.n
    case "sum":
      return state.s
    case "avg":
      return state.c === 0 ? null : state.s / state.c
    default:
      return state.c === 0 ? null : state.v
  }
}

/** The groups a reader sees: every group with rows (the one group of an ungrouped aggregate always). */
export const visible = (shape: { readonly groupBy: ReadonlyArray<string> }, groups: ReadonlyArray<GroupState>) =>
  shape.groupBy.length === 0
    ? [groups.find((g) => g.key === "[]") ?? { key: "[]", group: {}, n: 0, c: 0, s: 0, v: null }]
    : groups.filter((g) => g.n > 0)

/** One row entering (`add`) or leaving (`remove`) a group. */
interface Touch {
  readonly key: string
  readonly group: Readonly<Record<string, unknown>>
  readonly dn: number
  readonly removes: boolean
  readonly remove: number | null
  readonly adds: boolean
  readonly add: number | null
}

const touches = (shape: Shape, change: PendingChange): ReadonlyArray<Touch> => {
  const out = (row: Readonly<Record<string, unknown>>): Touch => ({ ...groupOf(shape, row), dn: -1, removes: true, remove: valueOf(shape, row), adds: false, add: null })
  const into = (row: Readonly<Record<string, unknown>>): Touch => ({ ...groupOf(shape, row), dn: 1, removes: false, remove: null, adds: true, add: valueOf(shape, row) })
  if (change.op === "insert") return change.after === null ? [] : [into(change.after)]
  if (change.op === "delete") return change.before === null ? [] : [out(change.before)]
  if (change.before === null || change.after === null) return []
  const before = out(change.before)
  const after = into(change.after)
  if (before.key !== after.key) return [before, after]
  return [{ ...after, dn: 0, removes: true, remove: before.remove }]
}

/** How a group's extreme is recomputed from the source (the bounded rescan; memory tier). */
export type Rescan = (shape: Shape, group: Readonly<Record<string, unknown>>) => Effect.Effect<number | null, StoreUnavailable>

/** count, sum, avg: one transaction's touches summed per group. */
const additive = (shape: Shape, touches: ReadonlyArray<Touch>) => {
  const byKey = new Map<string, { group: Readonly<Record<string, unknown>>; dn: number; dc: number; ds: number }>()
  for (const touch of touches) {
    let sum = byKey.get(touch.key)
    if (sum === undefined) byKey.set(touch.key, sum = { group: touch.group, dn: 0, dc: 0, ds: 0 })
    sum.dn += touch.dn
    if (shape.op === "count") {
      sum.dc += touch.dn
      continue
    }
    sum.dc += (touch.adds && touch.add !== null ? 1 : 0) - (touch.removes && touch.remove !== null ? 1 : 0)
    sum.ds += (touch.adds ? touch.add ?? 0 : 0) - (touch.removes ? touch.remove ?? 0 : 0)
  }
  return [...byKey].filter(([, d]) => d.dn !== 0 || d.dc !== 0 || d.ds !== 0).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
}

/**
 * min, max: per touch, the counts plus a value that beats the extreme; when the touch removed the
 * extreme and brought nothing as good, one rescan of that group.
 */
const applyExtreme = (storage: MemoryStorageShape, shape: Shape, rescan: Rescan, touch: Touch): Effect.Effect<void, StoreUnavailable> => {
  const op = shape.op as "min" | "max"
  const better = op === "min" ? (a: number, b: number) => a < b : (a: number, b: number) => a > b
  const dc = (touch.adds && touch.add !== null ? 1 : 0) - (touch.removes && touch.remove !== null ? 1 : 0)
  const added = touch.adds ? touch.add : null
  return Effect.flatMap(storage.extreme(shape.name, touch.key, touch.group, op, touch.dn, dc, added), (state) => {
    const removed = touch.removes ? touch.remove : null
    const replaced = removed !== null && added !== null && !better(removed, added)
    // The extreme left if nothing now beats the removed value (a tie may remain: the rescan finds it).
    const left = removed !== null && !replaced && state.c > 0 && state.v !== null && !better(state.v, removed)
    return left
      ? Effect.flatMap(rescan(shape, touch.group), (v) => storage.setExtreme(shape.name, touch.key, v))
      : Effect.void
  })
}

/** Memory tier: applies a transaction's changes to the source table (inside that transaction). */
export const applyChanges = (
  storage: MemoryStorageShape,
  shape: Shape,
  rescan: Rescan,
  changes: ReadonlyArray<PendingChange>
): Effect.Effect<void, StoreUnavailable> => {
  const all = changes.flatMap((change) => change.table === shape.table.name ? touches(shape, change) : [])
  if (shape.op === "min" || shape.op === "max") {
    return Effect.forEach(all, (touch) => applyExtreme(storage, shape, rescan, touch), { discard: true })
  }
  return Effect.forEach(additive(shape, all), ([key, d]) => storage.add(shape.name, key, d.group, d.dn, d.dc, d.ds), { discard: true })
}

/** Folds rows into groups (memory rebuild, and the reference recomputation of the tests). */
export const fold = (shape: Shape, rows: Iterable<Readonly<Record<string, unknown>>>): ReadonlyArray<GroupState> => {
  const groups = new Map<string, { key: string; group: Readonly<Record<string, unknown>>; n: number; c: number; s: number; v: number | null }>()
  if (shape.groupBy.length === 0) groups.set("[]", { key: "[]", group: {}, n: 0, c: 0, s: 0, v: null })
  for (const row of rows) {
    const { group, key } = groupOf(shape, row)
    let state = groups.get(key)
    if (state === undefined) groups.set(key, state = { key, group, n: 0, c: 0, s: 0, v: null })
    state.n++
    const value = shape.op === "count" ? null : valueOf(shape, row)
    if (shape.op === "count") state.c++
    else if (value !== null) {
      state.c++
      state.s += value
      if (state.v === null || (shape.op === "min" ? value < state.v : value > state.v)) state.v = value
    }
  }
  return [...groups.values()].map((g) => shape.op === "min" || shape.op === "max" ? g : { ...g, v: null })
}

/** Memory tier: rescan by reading the group's rows through the store (inside the writing transaction). */
export const rescanStore = (store: StoreShape): Rescan => (shape, group) =>
  Effect.map(
    Subject.asSystem(store.find(shape.table, { where: group as never })) as Effect.Effect<ReadonlyArray<Record<string, unknown>>, StoreUnavailable>,
    (rows) => {
      let v: number | null = null
      for (const row of rows) {
        const value = valueOf(shape, row)
        if (value !== null && (v === null || (shape.op === "min" ? value < v : value > v))) v = value
      }
      return v
    }
  ).pipe(Effect.catchAll((error) => Effect.fail(error as StoreUnavailable)))

/** Memory tier: a full rebuild from a walk of the source. */
export const rebuildStore = (store: StoreShape, storage: StorageShape, shape: Shape, at: number) =>
  Subject.asSystem(store.transaction(Effect.gen(function*() {
    const rows = yield* Stream.runCollect(store.walk(shape.table, { pageSize: 5_000 }))
    yield* storage.rebuild(shape.name, fold(shape, rows as Iterable<Record<string, unknown>>), at, 0)
  }))).pipe(Effect.catchAll((error) => Effect.fail(error as StoreUnavailable)))

const quote = (identifier: string) => `"${identifier.replaceAll(`"`, `""`)}"`

/**
 * SQL tiers: a full rebuild with one `GROUP BY`, the source locked against writers meanwhile. The
 * group key is computed by the same expression as the triggers' (see `Triggers`).
 */
export const rebuildSql = (storage: StorageShape, shape: Shape, at: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })
    const column = shape.column === undefined ? null : quote(shape.column)
    const groups = shape.groupBy.map(quote)
    const select = [
      `${Triggers.keyExpression(dialect, shape, "")} AS key`,
      `${Triggers.groupExpression(dialect, shape, "")} AS grp`,
      "COUNT(*) AS n",
      column === null || shape.op === "count" ? "COUNT(*) AS c" : `COUNT(${column}) AS c`,
      column === null || shape.op === "count" ? "0 AS s" : `SUM(${column}) AS s`,
      column === null ? "NULL AS v" : `${shape.op === "max" ? "MAX" : "MIN"}(${column}) AS v`
    ].join(", ")
    const text = `SELECT ${select} FROM ${quote(shape.table.name)}${groups.length === 0 ? "" : ` GROUP BY ${groups.join(", ")}`}`
    yield* sql.withTransaction(Effect.gen(function*() {
      if (dialect === "pg") yield* sql.unsafe(`LOCK TABLE ${quote(shape.table.name)} IN SHARE ROW EXCLUSIVE MODE`)
      const rows = yield* sql.unsafe<Record<string, unknown>>(text)
      const states = rows.map((row): GroupState => ({
        key: String(row.key),
        group: (typeof row.grp === "string" ? JSON.parse(row.grp) : row.grp) as Record<string, unknown>,
        n: Number(row.n),
        c: Number(row.c),
        s: row.s === null || row.s === undefined ? 0 : Number(row.s),
        v: shape.op === "min" || shape.op === "max" ? (row.v === null || row.v === undefined ? null : Number(row.v)) : null
      }))
      if (shape.groupBy.length === 0 && states.length === 0) states.push({ key: "[]", group: {}, n: 0, c: 0, s: 0, v: null })
      yield* Effect.mapError(storage.rebuild(shape.name, states, at, 0), (e) => e)
    }).pipe(Effect.mapError((e) => "_tag" in e && e._tag === "StoreUnavailable" ? e : unavailable(e as never))))
  }).pipe(Effect.mapError((e): StoreUnavailable => e as StoreUnavailable))
