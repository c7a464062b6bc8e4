/**
 * The setup the store benchmarks share: their items table, a change tap that discards every change
 * (so a figure is the store's own cost, not listener delivery), the memory and SQL tiers over it,
 * the raw peers' table, and a scratch PostgreSQL database per run.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Layer, Queue, Schema } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import { scratchDatabase } from "../pgDatabase.js"

/** An items table (tenant-scoped: every read and write checks the tenant) named `name`. */
export const itemsTable = (name: string) =>
  defineTable(name, {
    fields: { tenantId: Schema.String, name: Schema.String, price: Schema.Number },
    tenantField: "tenantId"
  })

/** The items table type. */
export type Items = ReturnType<typeof itemsTable>

/** A tap that stages and publishes nothing: measures the store, not its listeners. */
export const discardingTap = Layer.succeed(ChangeTap.ChangeTap, {
  scope: "local",
  stage: () => Effect.void,
  publish: () => Effect.void,
  subscribe: () => Effect.void,
  addStager: () => Effect.void,
  stagers: () => [],
  settled: Effect.void,
  events: Effect.acquireRelease(Queue.unbounded<never>(), Queue.shutdown)
})

/** The memory tier over the discarding tap. */
export const memoryTier: Layer.Layer<Store.Store> = Store.layerMemory.pipe(Layer.provide(discardingTap))

/** The SQL tier on `client` over the discarding tap, with `table` created first. */
export const sqlTier = (table: Items, client: Layer.Layer<SqlClient.SqlClient, unknown>): Layer.Layer<Store.Store, unknown> =>
  Store.layerSql.pipe(
    Layer.provideMerge(discardingTap),
    Layer.provide(Layer.effectDiscard(SchemaDiffer.apply([table])).pipe(Layer.provideMerge(client)))
  )

/** The raw peers' table, `raw_items`, in each dialect (PostgreSQL's ids compare bytewise, as the store's do). */
export const rawItemsDdl = {
  sqlite: `CREATE TABLE raw_items (id TEXT PRIMARY KEY, "tenantId" TEXT, name TEXT, price REAL)`,
  pg: `CREATE TABLE raw_items (id TEXT COLLATE "C" PRIMARY KEY, "tenantId" TEXT, name TEXT, price DOUBLE PRECISION)`,
  /** The tenant index the store's tables have. */
  tenantIndex: `CREATE INDEX raw_items_tenant ON raw_items ("tenantId")`
}

/** Runs `f` on a fresh PostgreSQL database named after `prefix`, dropped afterwards. */
export const withPgDatabase = async <A>(prefix: string, f: (url: string) => Promise<A>): Promise<A> => {
  const db = await scratchDatabase(prefix)
  try {
    return await f(db.url)
  } finally {
    await db.drop()
  }
}
