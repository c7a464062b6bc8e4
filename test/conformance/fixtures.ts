/**
 * Tables, rows and tiers shared by the store conformance suite.
 */
import type { SqlClient } from "@effect/sql"
import type { Layer } from "effect"
import { Effect, Layer as L, Schema } from "effect"
import type * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as RecordingTap from "../kernel/support/RecordingTap.js"

/** A tenant table with every column kind: text, number, boolean, JSON, optional and nullable. */
export const Items = defineTable("items", {
  fields: {
    tenantId: Schema.String,
    name: Schema.String,
    price: Schema.Number,
    active: Schema.Boolean,
    note: Schema.optional(Schema.String),
    tags: Schema.Array(Schema.String),
    meta: Schema.NullOr(Schema.Struct({ color: Schema.String }))
  },
  tenantField: "tenantId",
  indexes: [["tenantId", "price"]]
})

/** A shared table (no tenant field) with a transformed field: dates are stored as ISO strings. */
export const Events = defineTable("events", {
  fields: { kind: Schema.String, n: Schema.Number, at: Schema.optional(Schema.Date) }
})

/** Two declarations of one table: the loose one can store rows the strict one refuses to read. */
export const LooseLabels = defineTable("labels", { fields: { text: Schema.String } })
export const StrictLabels = defineTable("labels", { fields: { text: Schema.String.pipe(Schema.minLength(5)) } })

export const tables = [Items, Events, LooseLabels]

/** What every tier under test provides. */
export type Services = Store.Store | ChangeTap.ChangeTap | RecordingTap.RecordingTap

/** A tier under test. */
export type Tier = Layer.Layer<Services, unknown>

/** The memory tier with a recording tap. */
export const memoryTier: Tier = Store.layerMemory.pipe(L.provideMerge(RecordingTap.layer()))

/** A SQL tier over `client` (schema applied) with a recording tap. */
export const sqlTier = (client: Layer.Layer<SqlClient.SqlClient, unknown>): Tier =>
  Store.layerSql.pipe(
    L.provideMerge(RecordingTap.layer()),
    L.provide(L.effectDiscard(SchemaDiffer.apply(tables)).pipe(L.provideMerge(client)))
  )

let counter = 0
/** A tenant no other test uses, so tests sharing one database do not see each other's rows. */
export const freshTenant = () => `t${Date.now().toString(36)}${(counter++).toString(36)}`

/** An Items row; `active` is true for even prices. */
export const item = (tenantId: string, name: string, price: number, extra: Partial<typeof Items.schema.Type> = {}) => ({
  tenantId,
  name,
  price,
  active: price % 2 === 0,
  tags: [name],
  meta: null,
  ...extra
})

/** A user of `tenantId` (null: a user without a tenant). */
export const member = (tenantId: string | null) => Subject.make({ type: "user", id: `u-${tenantId}`, tenantId })

/** The recorder with its calls forgotten, for a test that inspects change calls. */
export const freshRecorder = Effect.tap(RecordingTap.RecordingTap, (recorder) => recorder.reset())
