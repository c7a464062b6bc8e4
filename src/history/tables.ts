/**
 * The row history table. One row per recorded version; the id `<table>:<rowId>:<version, 10 digits>`
 * makes a version unique per row and sorts a row's versions in order.
 */
import { Schema } from "effect"
import { defineTable } from "../kernel/schema/Table.js"

/** `_fw_row_history`. */
export const RowHistory = defineTable("_fw_row_history", {
  fields: {
    tableName: Schema.String,
    rowId: Schema.String,
    version: Schema.Number,
    op: Schema.Literal("insert", "update", "delete"),
    data: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
    changedAt: Schema.Number,
    tenantId: Schema.NullOr(Schema.String),
    traceId: Schema.String,
    subjectId: Schema.NullOr(Schema.String),
    procedure: Schema.NullOr(Schema.String)
  },
  tenantField: "tenantId",
  // Point-in-time reads look up (table, row) and walk versions or change times.
  indexes: [["tableName", "rowId", "version"], ["tableName", "rowId", "changedAt"]]
})

/** The id of a version record. */
export const versionId = (table: string, rowId: string, version: number) =>
  `${table}:${rowId}:${String(version).padStart(10, "0")}`
