/**
 * The tier contract under `Store.make`: a small set of operations over encoded (JSON-safe) rows.
 * Everything else — schema encoding, tenant scoping, change events, read tracking — lives once in
 * `StoreRuntime`, so every tier behaves the same.
 */
import type { Effect } from "effect"
import type { DuplicateRow, StoreUnavailable } from "./Errors.js"
import type * as Table from "./Table.js"

/** A row in its encoded form. */
export type Encoded = Readonly<Record<string, unknown>>

/** Comparison operators of a normalised condition. */
export type Operator = "eq" | "neq" | "gt" | "gte" | "lt" | "lte" | "in" | "nin"

/** One normalised condition on an encoded value. */
export interface Clause {
  readonly field: string
  readonly op: Operator
  readonly value: unknown
}

/** A normalised read. Ties in `orderBy` are broken by `id` ascending, so paging is stable. */
export interface Query {
  readonly where: ReadonlyArray<Clause>
  readonly orderBy: string
  readonly direction: "asc" | "desc"
  readonly limit?: number | undefined
  readonly offset?: number | undefined
}

/** A storage tier. */
export interface Driver {
  readonly dialect: "memory" | "sqlite" | "pg"
  /** True when a single statement is atomic by itself (SQL), so a one-statement write needs no transaction. */
  readonly atomicStatements: boolean
  /** Inserts rows; fails `DuplicateRow` when an id exists (and inserts none of them). */
  readonly insert: (table: Table.Any, rows: ReadonlyArray<Encoded>) => Effect.Effect<void, DuplicateRow | StoreUnavailable>
  /** Replaces the row with the same id. */
  readonly replace: (table: Table.Any, row: Encoded) => Effect.Effect<void, StoreUnavailable>
  /** Removes the row with `id`. */
  readonly remove: (table: Table.Any, id: string) => Effect.Effect<void, StoreUnavailable>
  readonly find: (table: Table.Any, query: Query) => Effect.Effect<ReadonlyArray<Encoded>, StoreUnavailable>
  readonly count: (table: Table.Any, where: ReadonlyArray<Clause>) => Effect.Effect<number, StoreUnavailable>
  /** Runs `effect` in a transaction; nested calls are savepoints. */
  readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreUnavailable, R>
}
