import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import type { Layer } from "effect"
import { Effect, Schema } from "effect"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"

const V1 = defineTable("orders", {
  fields: { tenantId: Schema.String, total: Schema.Number },
  tenantField: "tenantId"
})
const V2 = defineTable("orders", {
  fields: { tenantId: Schema.String, total: Schema.Number, note: Schema.optional(Schema.String), paid: Schema.Boolean },
  tenantField: "tenantId",
  indexes: [["tenantId", "total"]]
})
const Framework = defineTable("_fw_things", {
  fields: { value: Schema.Boolean, payload: Schema.Struct({ a: Schema.Number }), at: Schema.Date }
})
const LongNames = defineTable("a_table_with_a_rather_long_name_for_testing", {
  fields: { first_long_column_name: Schema.String, second_long_column_name: Schema.String },
  indexes: [["first_long_column_name", "second_long_column_name"]]
})

const tableNames = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql.onDialectOrElse({
    pg: () => sql<{ readonly name: string }>`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()`,
    orElse: () => sql<{ readonly name: string }>`SELECT name FROM sqlite_master WHERE type = 'table'`
  })
  return rows.map((row) => row.name).sort()
})

const differ = (name: string, client: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  describe(`schema differ: ${name}`, () => {
    it.scopedLive("a dry run lists the steps and changes nothing; apply runs them once, then plans nothing", () =>
      Effect.gen(function*() {
        const dry = yield* SchemaDiffer.plan([V1, Framework])
        assert.deepStrictEqual(dry.map((s) => s.description), [
          "create table orders (id text, tenantId text, total number)",
          "create index orders_tenantId_idx on orders (tenantId)",
          "create table _fw_things (id text, value boolean, payload json, at text)"
        ])
        assert.isTrue(dry.every((step) => step.sql.startsWith("CREATE ")))
        assert.deepStrictEqual(yield* tableNames, [])
        assert.deepStrictEqual(yield* SchemaDiffer.plan([V1, Framework]), dry)
        assert.deepStrictEqual(yield* SchemaDiffer.apply([V1, Framework]), dry)
        assert.deepStrictEqual(yield* tableNames, ["_fw_things", "orders"])
        assert.deepStrictEqual(yield* SchemaDiffer.apply([V1, Framework]), [])
        assert.deepStrictEqual(yield* SchemaDiffer.plan([V1, Framework]), [])
      }).pipe(Effect.provide(client)))

    it.scopedLive("a changed declaration adds its new columns (nullable) and index, keeping the data", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* SchemaDiffer.apply([V1])
        yield* sql`INSERT INTO orders (id, ${sql("tenantId")}, total) VALUES ('o1', 't1', 10)`
        const steps = yield* SchemaDiffer.apply([V2])
        assert.deepStrictEqual(steps.map((s) => [s.kind, s.description]), [
          ["addColumn", "add column orders.note text (nullable)"],
          ["addColumn", "add column orders.paid boolean (nullable)"],
          ["createIndex", "create index orders_tenantId_total_idx on orders (tenantId, total)"]
        ])
        assert.deepStrictEqual(yield* SchemaDiffer.plan([V2]), [])
        // Going back to the older declaration drops nothing.
        assert.deepStrictEqual(yield* SchemaDiffer.plan([V1]), [])
        const rows = yield* sql<{ readonly id: string; readonly note: string | null }>`SELECT id, note FROM orders`
        assert.deepStrictEqual(rows.map((r) => [r.id, r.note]), [["o1", null]])
      }).pipe(Effect.provide(client)))

    it.scopedLive("long index names are shortened deterministically and stay idempotent", () =>
      Effect.gen(function*() {
        const [, index] = yield* SchemaDiffer.apply([LongNames])
        const name = SchemaDiffer.indexName(LongNames.name, LongNames.indexes[0]!)
        assert.isAtMost(name.length, 63)
        assert.match(name, /^a_table_with_a_rather_long_name_for_testing_first_[0-9a-f]{8}_idx$/)
        assert.include(index?.sql ?? "", name)
        assert.deepStrictEqual(yield* SchemaDiffer.plan([LongNames]), [])
      }).pipe(Effect.provide(client)))
  })

differ("sqlite", SqliteClient.layer({ filename: ":memory:" }))
if (Pg.serverUrl !== null) {
  differ("postgresql", Pg.layerFreshClient)

  describe("schema differ: postgresql column types", () => {
    it.scopedLive("text, double precision, boolean and jsonb; text compares bytewise", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* SchemaDiffer.apply([Framework, V2])
        const columns = yield* sql<{ readonly table_name: string; readonly column_name: string; readonly data_type: string; readonly collation_name: string | null }>`
          SELECT table_name, column_name, data_type, collation_name FROM information_schema.columns
          WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`
        assert.deepStrictEqual(columns.map((c) => `${c.table_name}.${c.column_name}:${c.data_type}`), [
          "_fw_things.id:text",
          "_fw_things.value:boolean",
          "_fw_things.payload:jsonb",
          "_fw_things.at:text",
          "orders.id:text",
          "orders.tenantId:text",
          "orders.total:double precision",
          "orders.note:text",
          "orders.paid:boolean"
        ])
        assert.isTrue(columns.filter((c) => c.data_type === "text").every((c) => c.collation_name === "C"))
      }).pipe(Effect.provide(Pg.layerFreshClient)))
  })
} else {
  describe("schema differ: postgresql", () => it("is skipped", () => console.warn(Pg.skipReason)))
}
