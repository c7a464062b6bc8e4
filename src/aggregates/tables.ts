/**
 * The aggregates' SQL tables (spec 2.13), created by the schema differ with the app's tables.
 *
 * `_fw_aggregate_meta`: one row per aggregate (id = name): the generation readers see, refresh
 * metadata, and the claims replicas take so a scheduled trigger runs once across a fleet.
 * `_fw_aggregate_rows`: the materialised rows, tagged with their aggregate and generation (a
 * replace writes generation g+1 and switches the meta row in one transaction). Incremental
 * aggregates keep one row per group here, generation 0, with the maintained state `n` (rows),
 * `c` (non-null values), `s` (sum) and `v` (the extreme for min/max).
 */
import { Schema } from "effect"
import { defineTable } from "../kernel/schema/Table.js"

/** Per-aggregate metadata. */
export const AggregateMeta = defineTable("_fw_aggregate_meta", {
  fields: {
    generation: Schema.Number,
    refreshedAt: Schema.NullOr(Schema.Number),
    rowCount: Schema.Number,
    durationMs: Schema.NullOr(Schema.Number),
    lastError: Schema.NullOr(Schema.String),
    /** The last schedule slot a replica claimed (epoch ms of the trigger). */
    lastSlot: Schema.NullOr(Schema.Number),
    /** When a replica last claimed an on-change refresh. */
    claimedAt: Schema.NullOr(Schema.Number),
    /** Incremental state built (true) or to be rebuilt. */
    ready: Schema.Boolean
  }
})

/** Materialised rows and incremental state. */
export const AggregateRows = defineTable("_fw_aggregate_rows", {
  fields: {
    aggregate: Schema.String,
    generation: Schema.Number,
    key: Schema.String,
    row: Schema.Unknown,
    n: Schema.NullOr(Schema.Number),
    c: Schema.NullOr(Schema.Number),
    s: Schema.NullOr(Schema.Number),
    v: Schema.NullOr(Schema.Number)
  },
  indexes: [["aggregate", "generation"]]
})

/** Every table of the area. */
export const tables = [AggregateMeta, AggregateRows] as const
