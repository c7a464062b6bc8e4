/**
 * The in-process tier. Committed rows live in one Map per table (with a lazily sorted id list for
 * keyset pages). A transaction writes into an overlay (nested transactions stack overlays), so
 * other fibers never see uncommitted rows; a commit folds the overlay into its parent, a rollback
 * drops it. Writers are serialised: an outermost transaction, or a write outside any, holds the
 * writer permit; reads never wait.
 */
import { Effect, FiberRef, Option } from "effect"
import * as Compare from "./Compare.js"
import * as Driver from "../../store/Driver.js"
import { DuplicateRow } from "../../Errors.js"
import type * as Table from "../../schema/Table.js"

/** Uncommitted rows of one table by id; `null` marks a deletion. */
type Pending = Map<string, Driver.Encoded | null>
/** The writes of one (nested) transaction, by table. */
type Overlay = Map<string, Pending>

interface Committed {
  readonly rows: Map<string, Driver.Encoded>
  /** Ids in ascending order; `undefined` after an insert or delete until the next keyset read. */
  sorted: Array<string> | undefined
}

const byId = (a: Driver.Encoded, b: Driver.Encoded) => Compare.compare(a.id, b.id)

/** The first index in sorted `ids` whose id is greater than `after`. */
const upperBound = (ids: ReadonlyArray<string>, after: string) => {
  let low = 0
  let high = ids.length
  while (low < high) {
    const mid = (low + high) >>> 1
    if (ids[mid]! <= after) low = mid + 1
    else high = mid
  }
  return low
}

const matchesAll = (row: Driver.Encoded, where: ReadonlyArray<Driver.Clause>) => {
  for (const clause of where) if (!Compare.matches(row, clause)) return false
  return true
}

/** Builds a memory driver with its own empty state. */
export const make: Effect.Effect<Driver.Driver> = Effect.gen(function*() {
  const tables = new Map<string, Committed>()
  const stackRef = FiberRef.unsafeMake<ReadonlyArray<Overlay>>([])
  const writer = yield* Effect.makeSemaphore(1)
  /** True while an outermost transaction holds the writer permit. */
  let transactionOpen = false

  const committedOf = (table: string): Committed => {
    let state = tables.get(table)
    if (state === undefined) tables.set(table, state = { rows: new Map(), sorted: undefined })
    return state
  }

  const commitRow = (table: string, id: string, row: Driver.Encoded | null) => {
    const state = committedOf(table)
    if (row === null) {
      if (state.rows.delete(id)) state.sorted = undefined
    } else {
      if (!state.rows.has(id)) state.sorted = undefined
      state.rows.set(id, row)
    }
  }

  const lookup = (stack: ReadonlyArray<Overlay>, table: string, id: string): Driver.Encoded | undefined => {
    for (let i = stack.length - 1; i >= 0; i--) {
      const row = stack[i]!.get(table)?.get(id)
      if (row !== undefined) return row ?? undefined
    }
    return tables.get(table)?.rows.get(id)
  }

  const touched = (stack: ReadonlyArray<Overlay>, table: string) => stack.some((overlay) => overlay.has(table))

  /** The rows this fiber sees: committed ones, under its transaction's overlays. */
  const visible = (stack: ReadonlyArray<Overlay>, table: string): Iterable<Driver.Encoded> => {
    const base = tables.get(table)?.rows ?? new Map<string, Driver.Encoded>()
    if (!touched(stack, table)) return base.values()
    const merged = new Map(base)
    for (const overlay of stack) {
      for (const [id, row] of overlay.get(table) ?? []) {
        if (row === null) merged.delete(id)
        else merged.set(id, row)
      }
    }
    return merged.values()
  }

  const select = (stack: ReadonlyArray<Overlay>, table: string, where: ReadonlyArray<Driver.Clause>) => {
    const point = where.find((clause) => clause.field === "id" && clause.op === "eq")
    const result: Array<Driver.Encoded> = []
    if (point !== undefined) {
      const row = typeof point.value === "string" ? lookup(stack, table, point.value) : undefined
      if (row !== undefined && matchesAll(row, where)) result.push(row)
      return result
    }
    for (const row of visible(stack, table)) if (matchesAll(row, where)) result.push(row)
    return result
  }

  /**
   * Applies a write: to the innermost overlay inside a transaction, else to the committed state
   * under the writer permit. `change` checks before it puts, so a refused write changes nothing.
   */
  const write = <E = never>(
    table: string,
    change: (stack: ReadonlyArray<Overlay>, put: (id: string, row: Driver.Encoded | null) => void) => E | undefined
  ): Effect.Effect<void, E> =>
    Effect.flatMap(FiberRef.get(stackRef), (stack) => {
      const outcome = (error: E | undefined) => error === undefined ? Effect.void : Effect.fail(error)
      const overlay = stack[stack.length - 1]
      if (overlay === undefined) {
        const apply = Effect.suspend(() => outcome(change(stack, (id, row) => commitRow(table, id, row))))
        // Checked and applied synchronously, so with no transaction open the permit adds nothing.
        return transactionOpen ? writer.withPermits(1)(apply) : apply
      }
      let pending = overlay.get(table)
      if (pending === undefined) overlay.set(table, pending = new Map())
      const into = pending
      return Effect.suspend(() => outcome(change(stack, (id, row) => void into.set(id, row))))
    })

  const fold = (from: Overlay, into: Overlay | undefined) => {
    for (const [table, rows] of from) {
      if (into === undefined) {
        for (const [id, row] of rows) commitRow(table, id, row)
        continue
      }
      let target = into.get(table)
      if (target === undefined) into.set(table, target = new Map())
      for (const [id, row] of rows) target.set(id, row)
    }
  }

  const page = (stack: ReadonlyArray<Overlay>, table: string, request: Driver.Page): Array<Driver.Encoded> => {
    const result: Array<Driver.Encoded> = []
    if (touched(stack, table)) {
      const rows = select(stack, table, request.where).sort(byId)
      const start = request.after === null ? 0 : upperBound(rows.map((row) => row.id as string), request.after)
      return rows.slice(start, start + request.limit)
    }
    const state = tables.get(table)
    if (state === undefined) return result
    const ids = state.sorted ??= [...state.rows.keys()].sort()
    for (let i = request.after === null ? 0 : upperBound(ids, request.after); i < ids.length; i++) {
      const row = state.rows.get(ids[i]!)!
      if (!matchesAll(row, request.where)) continue
      result.push(row)
      if (result.length === request.limit) break
    }
    return result
  }

  const driver: Driver.Driver = {
    dialect: "memory",
    insert: (table: Table.Any, rows) =>
      write(table.name, (stack, put): DuplicateRow | undefined => {
        const seen = new Set<string>()
        for (const row of rows) {
          const id = row.id as string
          if (seen.has(id) || lookup(stack, table.name, id) !== undefined) return new DuplicateRow({ table: table.name, id })
          seen.add(id)
        }
        for (const row of rows) put(row.id as string, row)
        return undefined
      }),
    replace: (table, row) => write<never>(table.name, (_, put) => void put(row.id as string, row)),
    delete: (table, id) => write<never>(table.name, (_, put) => void put(id, null)),
    deleteMany: (table, ids) =>
      write<never>(table.name, (stack, put) => {
        for (const id of ids) if (lookup(stack, table.name, id) !== undefined) put(id, null)
      }),
    get: (table, id) => Effect.map(FiberRef.get(stackRef), (stack) => Option.fromNullable(lookup(stack, table.name, id))),
    getNow: (table, id, fiber) => lookup(fiber.getFiberRef(stackRef), table.name, id) ?? undefined,
    insertNow: (table, row, fiber) => {
      const stack = fiber.getFiberRef(stackRef)
      const overlay = stack[stack.length - 1]
      // Outside a transaction while another fiber's is open, the write waits for the permit: `insert`.
      if (overlay === undefined && transactionOpen) return Driver.NotNow
      const id = row.id as string
      if (lookup(stack, table.name, id) !== undefined) return new DuplicateRow({ table: table.name, id })
      if (overlay === undefined) {
        commitRow(table.name, id, row)
        return undefined
      }
      let pending = overlay.get(table.name)
      if (pending === undefined) overlay.set(table.name, pending = new Map())
      pending.set(id, row)
      return undefined
    },
    find: (table, query) =>
      Effect.map(FiberRef.get(stackRef), (stack) => {
        const rows = select(stack, table.name, query.where)
        const sign = query.direction === "desc" ? -1 : 1
        const field = query.orderBy
        rows.sort((a, b) => sign * Compare.compare(a[field], b[field]) || Compare.compare(a.id, b.id))
        const offset = query.offset ?? 0
        return query.limit === undefined ? rows.slice(offset) : rows.slice(offset, offset + query.limit)
      }),
    count: (table, where) => Effect.map(FiberRef.get(stackRef), (stack) => select(stack, table.name, where).length),
    page: (table, request) => Effect.map(FiberRef.get(stackRef), (stack) => page(stack, table.name, request)),
    transaction: (effect) =>
      Effect.flatMap(FiberRef.get(stackRef), (stack) => {
        const overlay: Overlay = new Map()
        const run = Effect.locally(effect, stackRef, [...stack, overlay]).pipe(
          Effect.tap(() => fold(overlay, stack[stack.length - 1]))
        )
        if (stack.length > 0) return run
        return writer.withPermits(1)(
          Effect.ensuring(
            Effect.zipRight(Effect.sync(() => transactionOpen = true), run),
            Effect.sync(() => transactionOpen = false)
          )
        )
      })
  }
  return driver
})
