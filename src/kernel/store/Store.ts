/**
 * The Store service: typed, tenant-scoped CRUD over declared tables, with transactions
 * (nested ones are savepoints), a keyset-paginated walk, and post-commit change events.
 *
 * Tiers: `layerMemory` (in process) and `layerSql` (SQLite or PostgreSQL, chosen by the
 * provided `SqlClient`). Both are built by `make` over a small `Driver`, so scoping, validation
 * and change events behave identically on every tier.
 */
import type { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import type { ChangeTap } from "../changes/ChangeTap.js"
import type * as Driver from "./Driver.js"
import * as MemoryDriver from "../drivers/memory/MemoryDriver.js"
import * as ReadTracking from "../changes/ReadTracking.js"
import * as SqlDriver from "../drivers/sql/SqlDriver.js"
import * as StoreRuntime from "./StoreRuntime.js"
import type { StoreShape } from "./StoreShape.js"

export type { Condition, FindOptions, Patch, StoreShape, WalkOptions, Where } from "./StoreShape.js"

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
export const layerSql: Layer.Layer<Store, never, ChangeTap | SqlClient.SqlClient> = Layer.scoped(
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
