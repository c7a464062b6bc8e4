/**
 * `_fw_idempotency`: one row per (tenant, method, path, key), in flight or completed, expiring after the TTL.
 */
import { Schema } from "effect"
import { defineTable } from "../kernel/Table.js"

/** The idempotency records. `id` is a digest of the scope and the key. */
export const IdempotencyRecords = defineTable("_fw_idempotency", {
  fields: {
    state: Schema.Literal("inFlight", "completed"),
    fingerprint: Schema.String,
    expiresAt: Schema.Number,
    status: Schema.NullOr(Schema.Number),
    headers: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
    body: Schema.NullOr(Schema.String)
  },
  indexes: [["expiresAt"]]
})
