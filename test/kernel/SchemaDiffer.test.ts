import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as SchemaDiffer from "../../src/kernel/SchemaDiffer.js"
import { defineTable } from "../../src/kernel/Table.js"
import * as Pg from "../support/Pg.js"

const V1 = defineTable("orders", {
  fields: { tenantId: Schema.String, total: Schema.Number },
  tenantField: "tenantId"
})
const V2 = defineTable("orders", {
  fields: { tenantId: Schema.String, total: Schema.Number, note: Schema.optional(Schema.String) },
  tenantField: "tenantId",
  indexes: [["tenantId", "total"]]
})
const Framework = defineTable("_fw_things", { fields: { value: Schema.Boolean } })

const differ = (name: string, client: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  describe(`schema differ: ${name}`, () => {
    it.scopedLive("applies once, then plans nothing; a dry run changes nothing", () =>
      Effect.gen(function*() {
        const dry = yield* SchemaDiffer.plan([V1, Framework])
        assert.deepStrictEqual(dry.map((s) => s.kind), ["createTable", "createIndex", "createTable"])
        assert.deepStrictEqual((yield* SchemaDiffer.plan([V1, Framework])).length, dry.length)
        const applied = yield* SchemaDiffer.apply([V1, Framework])
        assert.deepStrictEqual(applied.map((s) => s.description), [
          "create table orders (id, tenantId, total)",
          "create index orders_tenantId_idx",
          "create table _fw_things (id, value)"
        ])
        assert.deepStrictEqual(yield* SchemaDiffer.apply([V1, Framework]), [])
      }).pipe(Effect.provide(client)))

    it.scopedLive("a changed declaration adds its new column and index, keeping the data", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* SchemaDiffer.apply([V1])
        yield* sql`INSERT INTO orders (id, ${sql("tenantId")}, total) VALUES ('o1', 't1', 10)`
        const steps = yield* SchemaDiffer.apply([V2])
        assert.deepStrictEqual(steps.map((s) => s.description), ["add column orders.note", "create index orders_tenantId_total_idx"])
        assert.deepStrictEqual(yield* SchemaDiffer.plan([V2]), [])
        const rows = yield* sql<{ readonly id: string; readonly note: string | null }>`SELECT id, note FROM orders`
        assert.deepStrictEqual(rows.map((r) => [r.id, r.note]), [["o1", null]])
      }).pipe(Effect.provide(client)))
  })

differ("sqlite", SqliteClient.layer({ filename: ":memory:" }))
if (Pg.serverUrl !== null) differ("postgresql", Pg.layerFreshClient)
else describe("schema differ: postgresql", () => it("is skipped", () => console.warn(Pg.skipReason)))
