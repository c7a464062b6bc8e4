/**
 * Typed errors of the search plugin (spec 7.1). `SearchBackendError` says whether a retry can help:
 * `transient` (network, timeout, engine unavailable, 5xx, 429) is retried with backoff; `permanent`
 * (a document or request the engine refuses, `map` throwing) goes to the drift ledger at once.
 *
 * This module imports nothing but `effect`, so a browser bundle may import it
 * (`@fw/framework/search/errors`).
 */
import { Schema } from "effect"

/** Whether retrying the same operation later can succeed. */
export const FailureKind = Schema.Literal("transient", "permanent")
/** @see FailureKind */
export type FailureKind = typeof FailureKind.Type

/** A backend operation failed. */
export class SearchBackendError extends Schema.TaggedError<SearchBackendError>()("SearchBackendError", {
  /** `transient` failures are retried; `permanent` ones are recorded immediately. */
  kind: FailureKind,
  /** The backend (`memory`, `sql`, `engineA`, ...). */
  backend: Schema.String,
  /** The operation: `upsert`, `remove`, `query`, `ensureIndex`, `reindex`, `documents`. */
  operation: Schema.String,
  message: Schema.String,
  /** HTTP status the engine answered, when there was one. */
  httpStatus: Schema.optional(Schema.Number),
  /** Milliseconds the engine asked us to wait (`Retry-After`), when it said. */
  retryAfterMs: Schema.optional(Schema.Number)
}) {
  /** The status a `search.query` caller sees: 503 for a transient failure, 502 for a permanent one. */
  get status() {
    return this.kind === "transient" ? 503 : 502
  }
}

/** `search.query` named an index the plugin does not declare: refused, not answered empty. */
export class SearchIndexNotFound extends Schema.TaggedError<SearchIndexNotFound>()("SearchIndexNotFound", {
  index: Schema.String
}) {
  override get message() {
    return `SearchIndexNotFound: no search index "${this.index}" is declared`
  }
  /** Answered as 404 (the procedure runtime maps `{status, message}` errors). */
  get status() {
    return 404
  }
}

/** A filter, facet or highlight field fails the identifier pattern or is outside `queryableFields`. */
export class SearchFieldRejected extends Schema.TaggedError<SearchFieldRejected>()("SearchFieldRejected", {
  index: Schema.String,
  field: Schema.String,
  /** `filter`, `facet` or `highlight`. */
  usage: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `SearchFieldRejected: search index "${this.index}": ${this.usage} field "${this.field}" is rejected: ${this.reason}`
  }
  /** Answered as 400. */
  get status() {
    return 400
  }
}

/** The memory backend was activated under `NODE_ENV=production` without `singleProcessMemoryIndex`. */
export class SearchBackendNotDurable extends Schema.TaggedError<SearchBackendNotDurable>()("SearchBackendNotDurable", {}) {
  override get message() {
    return "the memory search backend is not durable: in production declare singleProcessMemoryIndex: true " +
      "(exactly one process serves search and re-seeds the index at start) or use a durable backend (sql or an engine)"
  }
}

/** A query input the plugin refuses before reaching the backend (bad limit, bad filter value, ...). */
export class SearchQueryInvalid extends Schema.TaggedError<SearchQueryInvalid>()("SearchQueryInvalid", {
  index: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `SearchQueryInvalid: search index "${this.index}": ${this.reason}`
  }
  /** Answered as 400. */
  get status() {
    return 400
  }
}

/** A search plugin declaration refused at configuration time. */
export class SearchConfigInvalid extends Error {
  override readonly name = "SearchConfigInvalid"
}

/** A reindex was asked for while one of the same index is running. */
export class SearchReindexBusy extends Schema.TaggedError<SearchReindexBusy>()("SearchReindexBusy", {
  index: Schema.String
}) {
  override get message() {
    return `SearchReindexBusy: a reindex of "${this.index}" is already running`
  }
  /** Answered as 409. */
  get status() {
    return 409
  }
}

/** The caller has no tenant, so nothing of a tenant-scoped index is theirs. */
export class SearchTenantMissing extends Schema.TaggedError<SearchTenantMissing>()("SearchTenantMissing", {
  index: Schema.String
}) {
  override get message() {
    return `SearchTenantMissing: search index "${this.index}" is tenant-scoped and the caller has no tenant`
  }
  /** Answered as 403. */
  get status() {
    return 403
  }
}

/**
 * The search errors a `search.query` caller can get, each with its own tag and status: the
 * plugin's `errors`. Give them to a client (`mount({errors: searchErrors})`,
 * `Client.make(procedures, {errors: searchErrors})`) to receive them typed. Browser-safe: import
 * from `@fw/framework/search/errors`.
 */
export const searchErrors = [
  SearchIndexNotFound,
  SearchFieldRejected,
  SearchQueryInvalid,
  SearchTenantMissing,
  SearchBackendError,
  SearchReindexBusy
] as const
