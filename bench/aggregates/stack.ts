/**
 * Stacks for the aggregates benches: SQLite (file) or a fresh PostgreSQL database, with the
 * aggregate tables applied.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Context, Effect, Layer, Redacted } from "effect"
import type { Scope } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import type * as Aggregate from "../../src/aggregates/Aggregate.js"
import { AggregateScheduler, layerMemory, layerSql, tables as aggregateTables } from "../../src/aggregates/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import type * as Table from "../../src/kernel/schema/Table.js"
import { scratchDatabase } from "../pgDatabase.js"

/** A fresh PostgreSQL database for the run, dropped at the end of the scope. */
export const freshPg: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.promise(() => scratchDatabase("agg")),
  (database) => Effect.promise(database.drop)
).pipe(Effect.map((database) => database.url))

export type Tier = "memory" | "sqlite" | "pg"

/** A client layer for `tier` (null for memory). */
export const client = (tier: Tier): Effect.Effect<Layer.Layer<SqlClient.SqlClient> | null, never, Scope.Scope> =>
  tier === "memory"
    ? Effect.succeed(null)
    : tier === "sqlite"
    ? Effect.succeed(SqliteClient.layer({ filename: path.join(mkdtempSync(path.join(tmpdir(), "fw-agg-")), "bench.db") }).pipe(Layer.orDie))
    : Effect.map(freshPg, (url) => PgClient.layer({ url: Redacted.make(url) }).pipe(Layer.orDie))

/** Store + ChangeTap (+ SqlClient) with `tables` applied. */
export const base = (sqlClient: Layer.Layer<SqlClient.SqlClient> | null, tables: ReadonlyArray<Table.Any>) =>
  Layer.build(
    (sqlClient === null
      ? Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
      : Store.layerSql.pipe(
        Layer.provideMerge(ChangeTap.layerLocal),
        Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([...tables, ...aggregateTables])).pipe(Layer.provideMerge(sqlClient)))
      )) as Layer.Layer<Store.Store | ChangeTap.ChangeTap | SqlClient.SqlClient>
  )

/** The scheduler over `ctx`. */
export const scheduler = (
  tier: Tier,
  ctx: Context.Context<Store.Store | ChangeTap.ChangeTap | SqlClient.SqlClient>,
  aggregates: ReadonlyArray<Aggregate.Any>,
  tables: ReadonlyArray<Table.Any>
) =>
  Layer.build(
    (tier === "memory" ? layerMemory(aggregates, { tables }) : layerSql(aggregates, { tables })) as Layer.Layer<
      AggregateScheduler,
      unknown,
      Store.Store | ChangeTap.ChangeTap | SqlClient.SqlClient
    >
  ).pipe(Effect.provide(ctx), Effect.map((c) => Context.get(c, AggregateScheduler)))
