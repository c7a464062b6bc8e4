/**
 * Framework tables that the app declares through its own options. `IdempotencyRecords` is among
 * the app's tables when `idempotency` is on, so the schema differ creates it with the rest
 * (`IdempotencyStore.layerSql` also applies it at boot).
 */
import { Schema } from "effect"
import { defineTable } from "../kernel/schema/Table.js"

/**
 * `_fw_idempotency`: one row per (tenant, method, path, key). The id is a digest of that scope, so
 * the primary key makes the claim atomic (`INSERT … ON CONFLICT DO NOTHING`).
 */
export const IdempotencyRecords = defineTable("_fw_idempotency", {
  fields: {
    tenant: Schema.String,
    method: Schema.String,
    path: Schema.String,
    key: Schema.String,
    /** A digest of the request (method, path, query, body): the same key with another request is 422. */
    fingerprint: Schema.String,
    state: Schema.Literal("in-flight", "completed"),
    /** The claim's random token: only its holder completes or releases the record. */
    owner: Schema.String,
    status: Schema.NullOr(Schema.Number),
    /** JSON of the replayed headers. */
    headers: Schema.NullOr(Schema.String),
    /** The response body, base64. */
    body: Schema.NullOr(Schema.String),
    createdAt: Schema.Number,
    expiresAt: Schema.Number
  },
  indexes: [["expiresAt"]]
})

/**
 * `_fw_rate_limits`: one fixed-window counter per rate-limit key (the route and the caller's key).
 * A request is one atomic upsert on the primary key (`INSERT … ON CONFLICT DO UPDATE … RETURNING`),
 * so replicas sharing the database share the count.
 */
export const RateLimitCounters = defineTable("_fw_rate_limits", {
  fields: {
    /** Requests counted in the current window (refused ones included). */
    count: Schema.Number,
    /** When the current window ends (epoch milliseconds). */
    resetAt: Schema.Number
  },
  indexes: [["resetAt"]]
})
