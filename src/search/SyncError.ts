/**
 * Why a change did not reach an index, and how the sync engine treats it: a transient failure is
 * retried with backoff, anything else is recorded in the drift ledger at once.
 */
import { Schema } from "effect"
import type { StoreError } from "../kernel/Errors.js"
import type { SearchBackendError } from "./Errors.js"

/** The ledger could not be written: the change would be lost, so its write must fail loudly. */
export class LedgerWriteFailed extends Schema.TaggedError<LedgerWriteFailed>()("LedgerWriteFailed", {
  index: Schema.String,
  rowId: Schema.String,
  message: Schema.String
}) {}

/** A row whose document cannot be derived (`map` threw, or returned a wrong id or tenant). */
export class DocumentInvalid extends Schema.TaggedError<DocumentInvalid>()("DocumentInvalid", {
  index: Schema.String,
  rowId: Schema.String,
  message: Schema.String
}) {}

/** A failure to sync one row to one index. */
export type SyncError = SearchBackendError | DocumentInvalid | StoreError

/** Worth retrying: the engine said so, or the database was unavailable. */
export const isTransient = (error: SyncError) =>
  error._tag === "SearchBackendError" ? error.kind === "transient" : error._tag === "StoreUnavailable"

/** The failure as the ledger's `lastError`. */
export const describe = (error: SyncError) => error._tag === "SearchBackendError" ? `${error.operation}: ${error.message}` : error.message
