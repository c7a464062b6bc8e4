/**
 * The store tiers the REST tests run on: memory, SQLite in memory, and PostgreSQL on a fresh
 * database (null when no server is reachable).
 */
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Layer } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"

/** A store tier, built afresh for each test. */
export type Tier = () => Layer.Layer<Store.Store | ChangeTap.ChangeTap | SqlClient.SqlClient, unknown> | Layer.Layer<Store.Store | ChangeTap.ChangeTap>

/**
 * The SQL tier over `client`. The SQL client stays in the output so the REST surface finds it: its
 * idempotency records and rate-limit counters live in the same database.
 */
export const sqlTier = (client: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provideMerge(client))

/** The tiers by name; PostgreSQL's is null when no server is reachable. */
export const tiers: ReadonlyArray<readonly [string, Tier | null]> = [
  ["memory", () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))],
  ["sqlite", () => sqlTier(SqliteClient.layer({ filename: ":memory:" }))],
  ["postgresql", Pg.serverUrl ? () => sqlTier(Pg.layerFreshClient) : null]
]
