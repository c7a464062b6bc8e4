/**
 * Tiers and stacks for the aggregates tests: a Store + ChangeTap (+ SqlClient) per tier, and the
 * scheduler built over it.
 */
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import type { Scope } from "effect"
import { Context, Effect, Layer } from "effect"
import type * as Aggregate from "../../src/aggregates/Aggregate.js"
import { AggregateScheduler, layerMemory, layerSql, tables as aggregateTables } from "../../src/aggregates/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"

export { appTables, Events, Orders } from "./tables.js"
import { appTables } from "./tables.js"

/** A storage tier. */
export interface Tier {
  readonly name: "memory" | "sqlite" | "pg"
  /** A fresh database (null for memory). */
  readonly client: () => Layer.Layer<SqlClient.SqlClient> | null
}

export const tiers: ReadonlyArray<Tier> = [
  { name: "memory", client: () => null },
  { name: "sqlite", client: () => SqliteClient.layer({ filename: ":memory:" }).pipe(Layer.orDie) },
  ...(Pg.serverUrl === null ? [] : [{ name: "pg" as const, client: () => Pg.layerFreshClient }])
]

/** Base services over a client (applies the schema). */
export const baseOn = (client: Layer.Layer<SqlClient.SqlClient> | null): Layer.Layer<Store.Store | ChangeTap.ChangeTap | SqlClient.SqlClient> =>
  (client === null
    ? Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
    : Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([...appTables, ...aggregateTables])).pipe(Layer.provideMerge(client)))
    )) as Layer.Layer<Store.Store | ChangeTap.ChangeTap | SqlClient.SqlClient>

/** Builds the base for `tier` in the current scope. */
export const base = (tier: Tier) =>
  Layer.build(baseOn(tier.client()))

/** Builds a scheduler over `ctx` in `scope` (or the current scope). */
export const scheduler = (
  tier: Tier["name"],
  ctx: Context.Context<Store.Store | ChangeTap.ChangeTap | SqlClient.SqlClient>,
  aggregates: ReadonlyArray<Aggregate.Any>,
  scope?: Scope.Scope
) => {
  const layer = (tier === "memory" ? layerMemory(aggregates, { tables: appTables }) : layerSql(aggregates, { tables: appTables })) as Layer.Layer<
    AggregateScheduler,
    unknown,
    Store.Store | ChangeTap.ChangeTap | SqlClient.SqlClient
  >
  const built = scope === undefined ? Layer.build(layer) : Layer.buildWithScope(layer, scope)
  return built.pipe(
    Effect.provide(ctx),
    Effect.map((c) => Context.get(c, AggregateScheduler))
  )
}
