/**
 * What the Store offers: its operations and the shapes of their options (conditions, ordering,
 * paging, patches). `Store` is the service that provides them; `StoreRuntime` builds them over a driver.
 */
import type { Effect, Option, Stream } from "effect"
import type { StoreError } from "../Errors.js"
import type * as Table from "../schema/Table.js"

/** A comparison on one field. A bare value means `eq`. */
export type Condition<V> =
  | V
  | {
    readonly eq?: V
    readonly neq?: V
    readonly gt?: V
    readonly gte?: V
    readonly lt?: V
    readonly lte?: V
    readonly in?: ReadonlyArray<V>
    readonly nin?: ReadonlyArray<V>
  }

/** Conditions on a table's fields, ANDed. */
export type Where<T extends Table.Any> = { readonly [K in keyof Table.Row<T>]?: Condition<Table.Row<T>[K]> }

/** Options of `find`. Default order is by `id` ascending. */
export interface FindOptions<T extends Table.Any> {
  readonly where?: Where<T>
  readonly orderBy?: keyof Table.Row<T> & string
  readonly direction?: "asc" | "desc"
  readonly limit?: number
  readonly offset?: number
}

/** Options of `walk`: a keyset-paginated scan (by id) that loads one page at a time. */
export interface WalkOptions<T extends Table.Any> {
  readonly where?: Where<T>
  /** Rows per page, default 1000. */
  readonly pageSize?: number
}

/** The fields of a row an update may change. */
export type Patch<T extends Table.Any> = Partial<Omit<Table.Row<T>, "id">>

/** The store operations. Every operation acting for a Subject (see `Subject.actingAs`) is tenant-scoped. */
export interface StoreShape {
  /** Inserts a row; `id` is generated (UUID) when absent. Fails `DuplicateRow` on an existing id. */
  readonly insert: <T extends Table.Any>(table: T, row: Table.Insert<T>) => Effect.Effect<Table.Row<T>, StoreError>
  /** Inserts many rows in one transaction, batched. */
  readonly insertMany: <T extends Table.Any>(
    table: T,
    rows: ReadonlyArray<Table.Insert<T>>
  ) => Effect.Effect<ReadonlyArray<Table.Row<T>>, StoreError>
  /** Changes some fields of an existing row. Fails `RowNotFound`. */
  readonly update: <T extends Table.Any>(table: T, id: string, patch: Patch<T>) => Effect.Effect<Table.Row<T>, StoreError>
  /** Inserts the row or replaces the existing row with that id. */
  readonly upsert: <T extends Table.Any>(table: T, row: Table.Row<T>) => Effect.Effect<Table.Row<T>, StoreError>
  /** Deletes a row. Fails `RowNotFound`. */
  readonly delete: <T extends Table.Any>(table: T, id: string) => Effect.Effect<void, StoreError>
  /**
   * Framework bookkeeping: deletes the rows with these ids of one of the framework's own `_fw_`
   * tables that nothing listens to (absent ids are skipped), one statement per chunk, with no change
   * event — so no listener, stager, outbox entry or live-query refresh — and no tenant scoping.
   * Inside a transaction it joins it. Any other table is a defect (it dies): app rows use `delete`.
   */
  readonly purge: <T extends Table.Any>(table: T, ids: ReadonlyArray<string>) => Effect.Effect<void, StoreError>
  /**
   * Reads one row by id. `forUpdate` (inside a transaction): the row is locked against concurrent
   * writers until the transaction ends and the read sees the latest committed version, so a
   * read-modify-write loses no concurrent change (PostgreSQL `FOR UPDATE`; the other tiers
   * serialise writers). A missing row locks nothing: a concurrent first insert fails `DuplicateRow`.
   */
  readonly get: <T extends Table.Any>(
    table: T,
    id: string,
    options?: { readonly forUpdate?: boolean }
  ) => Effect.Effect<Option.Option<Table.Row<T>>, StoreError>
  /** Reads rows matching `where`, ordered and paged. */
  readonly find: <T extends Table.Any>(
    table: T,
    options?: FindOptions<T>
  ) => Effect.Effect<ReadonlyArray<Table.Row<T>>, StoreError>
  /** Counts rows matching `where`. */
  readonly count: <T extends Table.Any>(
    table: T,
    options?: { readonly where?: Where<T> }
  ) => Effect.Effect<number, StoreError>
  /** Streams every matching row in id order, one page in memory at a time. */
  readonly walk: <T extends Table.Any>(table: T, options?: WalkOptions<T>) => Stream.Stream<Table.Row<T>, StoreError>
  /**
   * Runs `effect` in a transaction. Nested calls are savepoints: a failing inner transaction
   * rolls back only its own writes. Change events are published once the outermost commits.
   */
  readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreError, R>
  /** The tier: `memory`, `sqlite` or `pg`. */
  readonly dialect: "memory" | "sqlite" | "pg"
}

