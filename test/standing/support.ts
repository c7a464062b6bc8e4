/**
 * Shared fixtures of the standing tests: tables, a store tier with the standing plugin running,
 * and a restartable SQLite file.
 */
import { FetchHttpClient } from "@effect/platform"
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Schema } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as PluginHost from "../../src/server/PluginHost.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import type { StandingPlugin } from "../../src/standing/index.js"
import { CostEvents, ExpectationState } from "../../src/standing/index.js"
import * as Pg from "../support/Pg.js"

/** Orders: a tenant, an amount (nullable), a status, and a timestamp. */
export const Orders = defineTable("orders", {
  fields: {
    tenantId: Schema.String,
    amount: Schema.NullOr(Schema.Number),
    status: Schema.String,
    placedAt: Schema.NullOr(Schema.Number)
  },
  tenantField: "tenantId"
})

/** Events of an experiment: a user, a value, a conversion flag, and the arm a flag served. */
export const Events = defineTable("events", {
  fields: {
    userId: Schema.String,
    value: Schema.Number,
    converted: Schema.Boolean,
    arm: Schema.NullOr(Schema.String)
  }
})

export const tables = [Orders, Events, CostEvents, ExpectationState]

/** A SQL client layer. */
export type Client = Layer.Layer<SqlClient.SqlClient, unknown>

/** A SQLite file that outlives one stack (restart tests). */
export const sqliteFile = () => {
  const file = path.join(mkdtempSync(path.join(tmpdir(), "fw-standing-")), "db.sqlite")
  return SqliteClient.layer({ filename: file }) as Client
}

/** A store on `client` (memory when null), local change scope, with `plugin` running and its registries provided. */
export const stack = (client: Client | null, plugin: StandingPlugin) =>
  plugin.registries.pipe(
    Layer.provideMerge(Layer.scopedDiscard(PluginHost.start(plugin))),
    Layer.provideMerge(storeTier(client)),
    Layer.provide(FetchHttpClient.layer)
  )

/** The tiers every storage behaviour runs on; PostgreSQL only when reachable. */
export const tiers: ReadonlyArray<{ readonly name: string; readonly client: () => Client | null }> = [
  { name: "memory", client: () => null },
  { name: "sqlite", client: () => SqliteClient.layer({ filename: ":memory:" }) as Client },
  ...(Pg.serverUrl === null ? [] : [{ name: "pg", client: () => Pg.layerFreshClient as Client }])
]

if (Pg.serverUrl === null) console.log(Pg.skipReason)

/** Runs `effect` and keeps its value (for readable pipelines). */
export const run = Effect.runPromise

/** A store on `client` (memory when null), local change scope, without any plugin. */
export const storeTier = (client: Client | null) =>
  client === null
    ? Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
    : Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables)).pipe(Layer.provideMerge(client)))
    )
