/**
 * The search plugin's tables: the drift ledger and the sync counters (spec 2.4), applied by the
 * schema differ like the app's own.
 */
import { Schema } from "effect"
import { defineTable } from "../kernel/schema/Table.js"

/**
 * `_fw_search_drift`: one row per (index, source row) whose index write failed. The id is
 * `<index>:<rowId>`. `state` is `retrying` while this process still retries a transient failure
 * (the row is written first, so a crash mid-backoff loses nothing), `failed` once it gave up or
 * the failure was permanent. The row is re-read on repair: the failed event itself is never kept.
 */
export const SearchDrift = defineTable("_fw_search_drift", {
  fields: {
    indexName: Schema.String,
    rowId: Schema.String,
    tableName: Schema.String,
    state: Schema.Literal("retrying", "failed"),
    lastError: Schema.String,
    errorKind: Schema.Literal("transient", "permanent"),
    attempts: Schema.Number,
    firstFailedAt: Schema.Number,
    lastFailedAt: Schema.Number
  },
  indexes: [["indexName", "lastFailedAt"], ["lastFailedAt"]]
})

/** `_fw_search_stats`: sync counters per (index, replica); the id is `<index>:<replica>`. */
export const SearchStats = defineTable("_fw_search_stats", {
  fields: {
    indexName: Schema.String,
    replica: Schema.String,
    synced: Schema.Number,
    removed: Schema.Number,
    dropped: Schema.Number,
    /** True once this replica received another replica's change (fleet change scope). */
    fleet: Schema.Boolean,
    lastReindexAt: Schema.NullOr(Schema.Number),
    lastReindexRows: Schema.NullOr(Schema.Number),
    /** Last flush or heartbeat of the replica (epoch ms). */
    seenAt: Schema.Number
  },
  indexes: [["indexName"]]
})

/** The ledger id of a (index, row). */
export const driftId = (index: string, rowId: string) => `${index}:${rowId}`

/**
 * `_fw_search_lease`: fleet-wide maintenance leases, so replicas sharing a database run each repair
 * sweep and each reindex once, not once per replica. The id names the work (`sweep`,
 * `reindex:<index>`); `holder` is the replica running it, until `expiresAt` (epoch ms) unless it
 * renews; a lapsed lease (its holder died) is taken over.
 */
export const SearchLease = defineTable("_fw_search_lease", {
  fields: {
    holder: Schema.String,
    expiresAt: Schema.Number
  }
})

/**
 * `_fw_search_pending`: one row per committed change to an indexed table whose index write is not
 * yet settled. It is written inside the writing transaction (so a change whose row cannot be
 * written is not committed either: the write fails), and deleted once every index of the table has
 * the change or its failure is in `_fw_search_drift`. The id is the change's `ref`. A row left
 * behind (the process stopped in between) is moved to the drift ledger by the sweep and repaired.
 */
export const SearchPending = defineTable("_fw_search_pending", {
  fields: {
    tableName: Schema.String,
    rowId: Schema.String,
    /** When the change was written (epoch ms). */
    stagedAt: Schema.Number
  },
  indexes: [["stagedAt"]]
})

/** Every table of the search plugin (what the schema differ applies for it). */
export const searchTables = [SearchDrift, SearchStats, SearchLease, SearchPending] as const
