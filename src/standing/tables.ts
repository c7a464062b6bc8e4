/**
 * The standing primitives' tables. Cost is an append-only ledger (replicas insert, never update,
 * so concurrent writers cannot conflict; every total is folded from it). An expectation's state
 * row keeps when its status began and the write that caused it, so a restart remembers both, and
 * replicas settle on one of each (see ExpectationStateRow).
 */
import { Schema } from "effect"
import { defineTable } from "../kernel/schema/Table.js"

/** `_fw_cost_events`: one row per recorded cost. */
export const CostEvents = defineTable("_fw_cost_events", {
  fields: {
    tenantId: Schema.String,
    unit: Schema.String,
    amount: Schema.Number,
    /** `<query tag>:<subscription id>` for recompute cost, else null. */
    subscription: Schema.NullOr(Schema.String),
    traceId: Schema.String,
    at: Schema.Number
  },
  tenantField: "tenantId",
  indexes: [["at"]]
})

/** `_fw_expectation_state`: one row per expectation (id = its name). */
export const ExpectationState = defineTable("_fw_expectation_state", {
  fields: {
    status: Schema.Literal("holding", "violated", "unknown"),
    since: Schema.NullOr(Schema.Number),
    cause: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
    updatedAt: Schema.Number,
    /** Bumped by every write (made under the row's lock); null in a row written before revisions. */
    revision: Schema.NullOr(Schema.Number),
    /** The engine instance and its episode of the status that wrote the row (`<instance>#<episode>`). */
    writer: Schema.NullOr(Schema.String)
  }
})

/** Every table of the standing primitives (`layerSql` applies them; `fw db apply` does for a served app). */
export const tables = [CostEvents, ExpectationState] as const
