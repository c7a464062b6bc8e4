/**
 * The in-process tier. Committed rows live in one Map per table. A transaction writes into an
 * overlay (nested transactions stack overlays), so other fibers never see uncommitted rows; a
 * commit folds the overlay into its parent, a rollback drops it. Writers are serialised.
 */
import { Effect, FiberRef } from "effect"
import * as Compare from "./Compare.js"
import type * as Driver from "./Driver.js"
import { DuplicateRow } from "./Errors.js"
import type * as Table from "./Table.js"

/** Rows of one table by id; `null` in an overlay marks a deletion. */
type Rows = Map<string, Driver.Encoded | null>
type Overlay = Map<string, Rows>

/** Builds a memory driver with its own empty state. */
export const make: Effect.Effect<Driver.Driver> = Effect.gen(function*() {
  const committed = new Map<string, Map<string, Driver.Encoded>>()
  const stackRef = FiberRef.unsafeMake<ReadonlyArray<Overlay>>([])
  const writer = yield* Effect.makeSemaphore(1)

  const lookup = (stack: ReadonlyArray<Overlay>, table: string, id: string): Driver.Encoded | undefined => {
    for (let i = stack.length - 1; i >= 0; i--) {
      const row = stack[i]!.get(table)?.get(id)
      if (row !== undefined) return row ?? undefined
    }
    return committed.get(table)?.get(id)
  }

  const visible = (stack: ReadonlyArray<Overlay>, table: string): Iterable<Driver.Encoded> => {
    const base = committed.get(table) ?? new Map<string, Driver.Encoded>()
    if (stack.every((overlay) => !overlay.has(table))) return base.values()
    const merged = new Map<string, Driver.Encoded>(base)
    for (const overlay of stack) {
      for (const [id, row] of overlay.get(table) ?? []) {
        if (row === null) merged.delete(id)
        else merged.set(id, row)
      }
    }
    return merged.values()
  }

  const select = (stack: ReadonlyArray<Overlay>, table: string, where: ReadonlyArray<Driver.Clause>) => {
    const byId = where.find((clause) => clause.field === "id" && clause.op === "eq")
    const candidates = byId === undefined
      ? visible(stack, table)
      : [lookup(stack, table, byId.value as string)].filter((row): row is Driver.Encoded => row !== undefined)
    const result: Array<Driver.Encoded> = []
    for (const row of candidates) if (where.every((clause) => Compare.matches(row, clause))) result.push(row)
    return result
  }

  /** Applies a write to the innermost overlay (every write runs inside a transaction). */
  const put = (table: string, id: string, row: Driver.Encoded | null) =>
    Effect.flatMap(FiberRef.get(stackRef), (stack) => {
      const overlay = stack[stack.length - 1]
      if (overlay === undefined) return Effect.dieMessage("memory store write outside a transaction")
      let rows = overlay.get(table)
      if (rows === undefined) overlay.set(table, rows = new Map())
      rows.set(id, row)
      return Effect.void
    })

  const fold = (from: Overlay, into: Overlay | undefined) => {
    for (const [table, rows] of from) {
      if (into !== undefined) {
        let target = into.get(table)
        if (target === undefined) into.set(table, target = new Map())
        for (const [id, row] of rows) target.set(id, row)
        continue
      }
      let target = committed.get(table)
      if (target === undefined) committed.set(table, target = new Map())
      for (const [id, row] of rows) {
        if (row === null) target.delete(id)
        else target.set(id, row)
      }
    }
  }

  const driver: Driver.Driver = {
    dialect: "memory",
    atomicStatements: false,
    insert: (table: Table.Any, rows) =>
      Effect.flatMap(FiberRef.get(stackRef), (stack) => {
        const seen = new Set<string>()
        for (const row of rows) {
          const id = row.id as string
          if (seen.has(id) || lookup(stack, table.name, id) !== undefined) {
            return Effect.fail(new DuplicateRow({ table: table.name, id }))
          }
          seen.add(id)
        }
        return Effect.forEach(rows, (row) => put(table.name, row.id as string, row), { discard: true })
      }),
    replace: (table, row) => put(table.name, row.id as string, row),
    remove: (table, id) => put(table.name, id, null),
    find: (table, query) =>
      Effect.map(FiberRef.get(stackRef), (stack) => {
        const rows = select(stack, table.name, query.where)
        const sign = query.direction === "desc" ? -1 : 1
        rows.sort((a, b) =>
          sign * Compare.compare(a[query.orderBy], b[query.orderBy]) || Compare.compare(a.id, b.id)
        )
        const offset = query.offset ?? 0
        return query.limit === undefined ? rows.slice(offset) : rows.slice(offset, offset + query.limit)
      }),
    count: (table, where) => Effect.map(FiberRef.get(stackRef), (stack) => select(stack, table.name, where).length),
    transaction: (effect) =>
      Effect.flatMap(FiberRef.get(stackRef), (stack) => {
        const overlay: Overlay = new Map()
        const run = Effect.locally(effect, stackRef, [...stack, overlay]).pipe(
          Effect.tap(() => fold(overlay, stack[stack.length - 1]))
        )
        return stack.length === 0 ? writer.withPermits(1)(run) : run
      })
  }
  return driver
})
