/**
 * The Store service: typed, tenant-scoped CRUD over declared tables, with transactions
 * (nested ones are savepoints), a keyset-paginated walk, and post-commit change events.
 *
 * Tiers: `layerMemory` (in process) and `layerSql` (SQLite or PostgreSQL, chosen by the
 * provided `SqlClient`). Both are built by `make` over a small `Driver`, so scoping, validation
 * and change events behave identically on every tier.
 */
import type { SqlClient } from "@effect/sql"
import type { Option, Stream } from "effect"
import { Context, Effect, Layer } from "effect"
import type { ChangeTap } from "./ChangeTap.js"
import type * as Driver from "./Driver.js"
import * as MemoryDriver from "./MemoryDriver.js"
import * as ReadTracking from "./ReadTracking.js"
import * as SqlDriver from "./SqlDriver.js"
import * as StoreRuntime from "./StoreRuntime.js"
import type { StoreError } from "./Errors.js"
import type * as Table from "./Table.js"

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
  /** Reads one row by id. */
  readonly get: <T extends Table.Any>(table: T, id: string) => Effect.Effect<Option.Option<Table.Row<T>>, StoreError>
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

/** The store service. */
export class Store extends Context.Tag("@fw/framework/Store")<Store, StoreShape>() {}

/** The in-process tier (dev and tests): rows in Maps, isolated transactions, serialised writers. Needs a `ChangeTap`. */
export const layerMemory: Layer.Layer<Store, never, ChangeTap> = Layer.effect(
  Store,
  Effect.flatMap(MemoryDriver.make, StoreRuntime.make)
)

/**
 * The SQL tier: SQLite or PostgreSQL, from the provided `SqlClient`. Needs a `ChangeTap`, and the
 * tables created by `SchemaDiffer.apply`.
 */
export const layerSql: Layer.Layer<Store, never, ChangeTap | SqlClient.SqlClient> = Layer.effect(
  Store,
  Effect.flatMap(SqlDriver.make, StoreRuntime.make)
)

/**
 * Runs `effect` and returns its result with the names of the tables it read (get, find, count,
 * walk); live queries re-run when one of them changes. Nested trackers each see the reads.
 */
export const trackReads: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<[A, ReadonlySet<string>], E, R> =
  ReadTracking.trackReads

/**
 * Builds a store over a `Driver` (a custom tier): encoding, tenant scoping, change events and read
 * tracking come with it. The ChangeTap is taken from the context.
 */
export const make: (driver: Driver.Driver) => Effect.Effect<StoreShape, never, ChangeTap> = StoreRuntime.make
