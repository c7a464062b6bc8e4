/**
 * The search backend contract. The plugin keeps an engine index in step with a table and serves
 * tenant-scoped queries; a backend only stores documents and answers queries. Every backend (memory,
 * sql, engineA/B/C, a user's own) implements `SearchBackendShape` and passes the same conformance
 * suite (`test/search/conformance/`).
 *
 * What the plugin guarantees before calling a backend (a backend must not re-check it):
 * - index names are the `index` of a declared spec, and `ensureIndex(spec)` ran first;
 * - filter, facet and highlight fields match `^[A-Za-z_][A-Za-z0-9_.]*$` and, when declared, `queryableFields`;
 * - the caller's tenant is already one of `filters` (`{field: tenantField, op: "eq", value: tenant}`);
 * - `engineParams` is already allow-list filtered (document-selecting keys are never there);
 * - `limit` is 1–1000, `offset` ≥ 0, `fuzziness` is `"auto"`, 0, 1 or 2; `in`/`nin` values are
 *   non-empty lists of scalars, other operators carry one scalar; `gt`/`gte`/`lt`/`lte` carry a
 *   number or an ISO-8601 date string.
 *
 * Semantics every backend follows (the conformance suite checks them):
 * - Documents are JSON objects with a string `id`; `upsert` replaces the whole document; `remove` of
 *   an absent id succeeds (both are idempotent: fleet replicas repeat them).
 * - Text: lower-cased, diacritics folded, split on anything that is not a letter or digit. Every
 *   query term must match (AND) in some searchable field. A term matches a word within the edit
 *   distance `fuzziness` (Levenshtein): an explicit 0, 1 or 2 is the maximum whatever the term's
 *   length (`x` with 1 matches `x1` and `y`); `"auto"` allows 0 edits for terms of 1–2 characters,
 *   1 for 3–5, 2 for longer ones. An empty `q` matches every document (filters still apply).
 * - Searchable fields: `spec.searchableFields`, else every string or string-list field of the
 *   document except `id` and the tenant field.
 * - Filters are ANDed. `eq`/`in` on a list-valued field match when any element matches; strings
 *   compare exactly (case-sensitive). `neq`/`nin` match documents where the field is missing.
 *   Ordered operators compare numbers numerically and ISO-8601 dates as instants; a document value
 *   of another kind does not match.
 * - Facets: for each facet field, every value (numbers and booleans as their JSON text, each
 *   element of a list) with its count over the whole matched set, before paging.
 * - Highlights: for each requested field with a matched word (a word within the allowed edits of a
 *   query term), the field's text (a list joined with ", ") HTML-escaped first, then each matched
 *   word wrapped in `preTag`/`postTag` (the tags are inserted verbatim). A field without a match is absent.
 * - Order: by relevance, ties by `id`; an empty `q` orders by `id`. The local backends (memory, sql)
 *   share one exact ranking (`Rank.ts`: nearer and denser matches first, ties by `id` in code point
 *   order), so they answer the same pages; an engine ranks by its own relevance.
 *   `found` is the size of the matched set.
 * - Failures are `SearchBackendError` with `kind` transient (network, timeout, 5xx, 429) or
 *   permanent (the engine refuses the request or document); a delete of a missing document is no failure.
 */
import type { Effect, Scope, Stream } from "effect"
import { Context } from "effect"
import type { SearchBackendError } from "./Errors.js"

/** The type of a document field, used by engines that need a schema (dates become numbers there). */
export type FieldType = "string" | "string[]" | "number" | "boolean" | "date"

/** What a backend needs to know about an index to create it. */
export interface IndexSpec {
  /** The engine index name. Backends that swap on reindex keep physical generations behind it (an alias). */
  readonly index: string
  /** The tenant field: always filterable (engineC: `filterOnly`), never searched or highlighted. */
  readonly tenantField: string
  /** Fields searched by `q` (engineA `query_by`, engineB `searchableAttributes`). Default: see module doc. */
  readonly searchableFields?: ReadonlyArray<string>
  /**
   * Fields callers may filter, facet and highlight on (the spec's `queryableFields`). Absent means
   * any field: engines that must declare filterable attributes up front then declare `fields`' keys.
   */
  readonly queryableFields?: ReadonlyArray<string>
  /** Field types, for engines that need a schema, and to compare dates. */
  readonly fields?: Readonly<Record<string, FieldType>>
}

/** An indexed document: a string `id` plus JSON fields. */
export interface Document {
  readonly id: string
  readonly [field: string]: unknown
}

/** A filter value. */
export type Scalar = string | number | boolean

/** The filter operators of spec 2.3. */
export type FilterOp = "eq" | "neq" | "gt" | "gte" | "lt" | "lte" | "in" | "nin"

/** One filter; the list in a query is ANDed. */
export interface Filter {
  readonly field: string
  readonly op: FilterOp
  /** A scalar, or a non-empty list for `in`/`nin`. */
  readonly value: Scalar | ReadonlyArray<Scalar>
}

/** Maximum edit distance of a query term; `"auto"` grows with the term's length. */
export type Fuzziness = "auto" | 0 | 1 | 2

/** Highlight request: fields and the caller's tags. */
export interface Highlight {
  readonly fields: ReadonlyArray<string>
  readonly preTag: string
  readonly postTag: string
}

/** A validated query, tenant filter included. */
export interface Query {
  readonly q: string
  readonly limit: number
  readonly offset: number
  readonly fuzziness: Fuzziness
  readonly filters: ReadonlyArray<Filter>
  readonly facets: ReadonlyArray<string>
  readonly highlight?: Highlight
  /** Allow-listed presentation parameters for engines; the memory and sql backends ignore them. */
  readonly engineParams: Readonly<Record<string, unknown>>
}

/** One hit. */
export interface Hit {
  readonly doc: Document
  /** Field → snippet; absent when no highlight was asked for. */
  readonly highlights?: Readonly<Record<string, string>>
}

/** A query's answer. */
export interface Result {
  readonly hits: ReadonlyArray<Hit>
  /** Field → value → count over the whole matched set. */
  readonly facets: Readonly<Record<string, Readonly<Record<string, number>>>>
  /** Size of the matched set (engines with estimates report their estimate). */
  readonly found: number
}

/**
 * A fresh physical index being built for a reindex. Writes go to it only; `swap` makes it the
 * live index atomically (for queries) and drops the previous one, so documents of rows deleted
 * meanwhile cannot survive as orphans. `abort` drops it and leaves the live index untouched.
 */
export interface Rebuild {
  readonly upsert: (docs: ReadonlyArray<Document>) => Effect.Effect<void, SearchBackendError>
  readonly remove: (ids: ReadonlyArray<string>) => Effect.Effect<void, SearchBackendError>
  readonly swap: Effect.Effect<void, SearchBackendError>
  readonly abort: Effect.Effect<void>
}

/** One operation of a batch write: the document to insert or replace, or `null` to remove `id`. */
export interface WriteOp {
  readonly id: string
  readonly doc: Document | null
}

/** The answer to a batch write: the operations the engine refused one by one (the rest applied). */
export interface WriteResult {
  readonly refused: ReadonlyArray<{ readonly id: string; readonly error: SearchBackendError }>
}

/** A search backend. `upsert`, `remove` and `query` are required; the rest make it a full citizen. */
export interface SearchBackendShape {
  /** `memory`, `sql`, `engineA`, ... (in logs, errors and the inspect view). */
  readonly name: string
  /** False for the memory backend: its index dies with the process (spec 3.2). */
  readonly durable?: boolean
  /** Creates the index (collection, settings, filterable attributes) if missing. Idempotent. */
  readonly ensureIndex?: (spec: IndexSpec) => Effect.Effect<void, SearchBackendError>
  /** Inserts or replaces documents (a write counts once the engine says it is applied). */
  readonly upsert: (index: string, docs: ReadonlyArray<Document>) => Effect.Effect<void, SearchBackendError>
  /** Removes documents by id; absent ids are not an error. */
  readonly remove: (index: string, ids: ReadonlyArray<string>) => Effect.Effect<void, SearchBackendError>
  /**
   * Applies a batch of operations on distinct ids in one engine request where the engine allows
   * (the sync engine's path). A document the engine refuses alone is answered in `refused`; a
   * failure of the whole request fails the effect (transient: the batch is retried; permanent: the
   * sync engine splits the batch to find the refused documents). Without it the sync engine calls
   * `remove`, then `upsert`.
   */
  readonly write?: (index: string, ops: ReadonlyArray<WriteOp>) => Effect.Effect<WriteResult, SearchBackendError>
  /** Answers a validated query. */
  readonly query: (index: string, query: Query) => Effect.Effect<Result, SearchBackendError>
  /** Every document of the live index (export / browse), for reconciliation and tests. */
  readonly documents?: (index: string) => Stream.Stream<Document, SearchBackendError>
  /** Starts building a fresh index for a reindex (see `Rebuild`). */
  readonly rebuild?: (spec: IndexSpec) => Effect.Effect<Rebuild, SearchBackendError, Scope.Scope>
}

/** The backend service the plugin runs on. */
export class SearchBackend extends Context.Tag("@fw/framework/search/SearchBackend")<SearchBackend, SearchBackendShape>() {}

/** The identifier pattern of filter, facet and highlight fields (spec 4.2). */
export const fieldPattern = /^[A-Za-z_][A-Za-z0-9_.]*$/

/** The maximum edit distance `fuzziness` allows for a term (see module doc). */
export const maxEdits = (fuzziness: Fuzziness, term: string): number => {
  if (fuzziness === "auto") return term.length <= 2 ? 0 : term.length <= 5 ? 1 : 2
  return fuzziness
}

/** An ISO-8601 date or date-time string (what ordered filters compare as an instant). */
export const isoDatePattern = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/

const zoned = /(?:Z|[+-]\d{2}:?\d{2})$/

/**
 * The instant of an ISO-8601 string, or undefined when it is not one. A date-time without its zone
 * is read as UTC (as a date alone is): `Date.parse` would read it in the process's local zone, so
 * the same document would compare differently on servers in different zones, and differently when
 * an engine's instant shadow was computed by another process. (A filter value must carry its zone:
 * see `Query.validate`.)
 */
export const isoInstant = (value: unknown): number | undefined => {
  if (typeof value !== "string" || !isoDatePattern.test(value)) return undefined
  const ms = Date.parse(value.length > 10 && !zoned.test(value) ? `${value.replace(" ", "T")}Z` : value)
  return Number.isNaN(ms) ? undefined : ms
}

/** Reads a dotted field path (`a.b`) of a document; own properties only (never the prototype). */
export const readPath = (doc: unknown, path: string): unknown => {
  let value: unknown = doc
  for (const part of path.split(".")) {
    if (value === null || typeof value !== "object" || !Object.prototype.hasOwnProperty.call(value, part)) return undefined
    value = (value as Record<string, unknown>)[part]
  }
  return value
}
