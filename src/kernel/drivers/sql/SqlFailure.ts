/**
 * How the SQL tier reads a database failure (an `@effect/sql` `SqlError`): as `StoreUnavailable`, a
 * unique violation, or a COMMIT whose outcome is unknown.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Predicate } from "effect"
import { CommitUnknown, StoreUnavailable } from "../../Errors.js"

const causeCode = (error: SqlError): string | undefined => {
  const cause = error.cause
  return Predicate.hasProperty(cause, "code") && typeof cause.code === "string" ? cause.code : undefined
}

/** Whether `error` is a refused duplicate key (PostgreSQL or SQLite). */
export const isUniqueViolation = (error: SqlError) => {
  const code = causeCode(error)
  return code === "23505" || code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "SQLITE_CONSTRAINT_UNIQUE"
}

/** The id PostgreSQL names in a unique violation's detail: `Key (id)=(…) already exists.` */
export const namedDuplicate = (error: SqlError): string | undefined => {
  const cause = error.cause
  const detail = Predicate.hasProperty(cause, "detail") ? cause.detail : undefined
  return typeof detail === "string" ? /\(id\)=\((.*)\)/.exec(detail)?.[1] : undefined
}

/** A database failure as `StoreUnavailable`: the message names the failure, never the data. */
export const unavailable = (error: SqlError): StoreUnavailable => {
  const code = causeCode(error)
  return new StoreUnavailable({ message: `database error: ${error.message}${code === undefined ? "" : ` (${code})`}` })
}

/**
 * Whether the server answered `error` with its own refusal, so an autocommitted statement rolled
 * back and wrote nothing: a SQLSTATE, except a lost or shut-down connection (class 08, 57 but a
 * cancelled statement, XX internal), after which the statement may have committed.
 */
export const refusedByServer = (error: SqlError): boolean => {
  const code = causeCode(error)
  return code !== undefined && /^[0-9A-Z]{5}$/.test(code) && (code === "57014" || !/^(08|57|XX)/.test(code))
}

/**
 * An autocommitted one-statement write that failed: `StoreUnavailable` when the server refused it
 * (nothing written), else `CommitUnknown`: the connection failed, possibly after the server ran and
 * committed it (only the answer lost), and `StoreUnavailable` would tell the caller nothing was
 * written (the idempotency binding would release its key, and the retry write again).
 */
export const autocommitFailure = (error: SqlError): StoreUnavailable | CommitUnknown =>
  refusedByServer(error)
    ? unavailable(error)
    : new CommitUnknown({ message: `the connection failed during a one-statement write: ${error.message}` })

/**
 * A COMMIT that failed. The server refusing it (a deferred constraint, a serialization failure)
 * rolled the transaction back: `StoreUnavailable`. A lost connection (no SQLSTATE, or class 08
 * connection exception, 57 operator intervention, XX internal) leaves the outcome unknown.
 * SQLite (`SQLITE_…` codes) runs in this process, so there is no connection to lose: a COMMIT it
 * refused (a deferred foreign key, `SQLITE_BUSY`, an I/O error) committed nothing, and the caller
 * rolls back whatever SQLite left open (see `SqliteTransaction`, `SqliteDirectTransaction`).
 */
export const commitFailure = (error: SqlError): StoreUnavailable | CommitUnknown => {
  const code = causeCode(error)
  const refused = code !== undefined &&
    (code.startsWith("SQLITE_") || (/^[0-9A-Z]{5}$/.test(code) && !/^(08|57|XX)/.test(code)))
  return refused
    ? unavailable(error)
    : new CommitUnknown({ message: `the connection failed during COMMIT: ${error.message}${code === undefined ? "" : ` (${code})`}` })
}
