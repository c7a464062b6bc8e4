/**
 * The flags plugin's tables (declared only with `store: 'sql'`).
 */
import { Schema } from "effect"
import { defineTable } from "../kernel/schema/Table.js"

const JsonRecord = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/**
 * `_fw_feature_flag_state`: the live override of one flag (id = flag key), patched over the code
 * definition. Every replica follows it through the change tap (fleet scope on PostgreSQL).
 */
export const FlagState = defineTable("_fw_feature_flag_state", {
  fields: {
    override: JsonRecord,
    version: Schema.Number,
    updatedAt: Schema.Number,
    updatedBy: Schema.NullOr(Schema.String)
  }
})

/**
 * `_fw_feature_flag_audit`: append-only, one row per flip or override (who, when, flag, old → new).
 * Who is the authenticated operator (`operatorType`, `operatorId`: a Subject, or `system` /
 * `inspect-token` for the inspect token); `note` is text the operator typed, never an identity.
 * `actor` is what rows written before the operator was recorded hold: a caller-typed name, unverified.
 */
export const FlagAudit = defineTable("_fw_feature_flag_audit", {
  fields: {
    flag: Schema.String,
    action: Schema.Literal("toggle", "override", "clear"),
    actor: Schema.NullOr(Schema.String),
    operatorType: Schema.NullOr(Schema.String),
    operatorId: Schema.NullOr(Schema.String),
    note: Schema.NullOr(Schema.String),
    at: Schema.Number,
    before: JsonRecord,
    after: JsonRecord
  },
  indexes: [["flag", "at"], ["at"]]
})

/**
 * `_fw_feature_flag_usage`: server-side reads, one row per (flag, UTC day, source); id
 * `<flag>|<day>|<source>`. Retention-swept.
 */
export const FlagUsage = defineTable("_fw_feature_flag_usage", {
  fields: {
    flag: Schema.String,
    day: Schema.String,
    dayStart: Schema.Number,
    source: Schema.String,
    count: Schema.Number,
    lastSeenAt: Schema.Number
  },
  indexes: [["flag", "dayStart"], ["dayStart"]]
})

/** Every table the plugin declares on the SQL tier. */
export const all = [FlagState, FlagAudit, FlagUsage] as const
