/**
 * DDL applied by replicas that may start at the same instant. PostgreSQL's `CREATE … IF NOT EXISTS`
 * is not safe against a concurrent create of the same name (the loser fails with a duplicate key
 * on `pg_type` or `pg_class`), so the DDL runs in a transaction holding an advisory lock: one
 * replica at a time, each seeing what the previous one created. Other dialects run it as it is.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"

/** The lock keys in use (one per owner, so unrelated DDL does not wait on each other). */
export const keys = {
  /** The fleet change outbox (`ChangeTap.layerFleet`). */
  outbox: 0x66775f6f, // "fw_o"
  /** The schema differ's plan and apply. */
  schema: 0x66775f73, // "fw_s"
  /** The search plugin's sql backend. */
  search: 0x66775f71 // "fw_q"
} as const

/** Runs `ddl` under the advisory lock `key` on PostgreSQL (in a transaction); elsewhere as it is. */
export const withDdlLock = (key: number) =>
<A, E, R>(ddl: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R | SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () => sql.withTransaction(Effect.zipRight(sql`SELECT pg_advisory_xact_lock(${key})`, ddl)),
      orElse: () => ddl
    }))
