/**
 * `search.query` (spec 2.3, 4.2): the input and output schemas, and the validation that turns a
 * caller's input into a backend `Query` with the caller's tenant ANDed on `tenantField`.
 */
import { Cause, Effect, Either, Schema } from "effect"
import * as LogText from "../kernel/LogText.js"
import * as IsoInstant from "../kernel/schema/IsoInstant.js"
import type { Subject } from "../kernel/Subject.js"
import { SearchBackendError, SearchFieldRejected, SearchIndexNotFound, SearchQueryInvalid, SearchTenantMissing } from "./Errors.js"
import type { Resolved } from "./Options.js"
import type { Filter, Query, Scalar } from "./SearchBackend.js"
import { fieldPattern, isoInstant } from "./SearchBackend.js"

const ScalarSchema = Schema.Union(Schema.String, Schema.Number, Schema.Boolean)

/** The input of `search.query`. */
export const Input = Schema.Struct({
  index: Schema.String,
  q: Schema.optional(Schema.String.pipe(Schema.maxLength(1000))),
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 1000))),
  offset: Schema.optional(Schema.Int.pipe(Schema.between(0, 100_000))),
  fuzziness: Schema.optional(Schema.Union(Schema.Literal("auto"), Schema.Literal(0, 1, 2))),
  filters: Schema.optional(Schema.Array(Schema.Struct({
    field: Schema.String,
    op: Schema.Literal("eq", "neq", "gt", "gte", "lt", "lte", "in", "nin"),
    value: Schema.Union(ScalarSchema, Schema.Array(ScalarSchema))
  })).pipe(Schema.maxItems(50))),
  facets: Schema.optional(Schema.Array(Schema.String).pipe(Schema.maxItems(20))),
  highlight: Schema.optional(Schema.Struct({
    fields: Schema.Array(Schema.String).pipe(Schema.maxItems(20)),
    preTag: Schema.String.pipe(Schema.maxLength(100)),
    postTag: Schema.String.pipe(Schema.maxLength(100))
  })),
  engineParams: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
/** @see Input */
export type Input = typeof Input.Type

/** The output of `search.query`. */
export const Output = Schema.Struct({
  hits: Schema.Array(Schema.Struct({
    doc: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    highlights: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
  })),
  facets: Schema.Record({ key: Schema.String, value: Schema.Record({ key: Schema.String, value: Schema.Number }) }),
  found: Schema.Number
})
/** @see Output */
export type Output = typeof Output.Type

/**
 * Presentation-only parameters allowed by default (snippet length, returned attributes, ...).
 * `allowedEngineParams` widens the list.
 */
export const defaultEngineParams: ReadonlyArray<string> = [
  "attributesToRetrieve",
  "attributesToSnippet",
  "attributesToCrop",
  "cropLength",
  "cropMarker",
  "snippetEllipsisText",
  "highlight_affix_num_tokens",
  "snippet_threshold",
  "include_fields",
  "exclude_fields",
  "showRankingScore"
]

/**
 * Keys that select documents (or the index, or the searched fields): never forwarded, even when
 * listed in `allowedEngineParams` (spec 7.1). Compared without case, `_` and `-`.
 */
export const documentSelectingParams: ReadonlyArray<string> = [
  "filter", "filters", "filter_by", "facetFilters", "numericFilters", "tagFilters", "optionalFilters", "facet_query",
  "facetQuery", "facets", "facet_by", "query_by", "queryBy", "restrictSearchableAttributes", "attributesToSearchOn",
  "preset", "pinned_hits", "hidden_hits", "enableRules", "ruleContexts", "enable_overrides", "override_tags", "q",
  "query", "index", "indexName", "collection", "x-typesense-api-key", "searchRules", "hybrid", "vector", "vector_query",
  "distinct", "group_by", "sort", "sort_by", "customRanking", "page", "per_page", "hitsPerPage", "offset", "limit",
  "length", "typoTolerance", "num_typos", "aroundLatLng", "insideBoundingBox", "insidePolygon", "similarQuery",
  "optionalWords", "removeWordsIfNoResults", "queryLanguages", "naturalLanguages", "userToken", "analyticsTags",
  "clickAnalytics", "enablePersonalization", "personalizationImpact", "relevancyStrictness", "matchingStrategy",
  "rankingScoreThreshold", "exhaustive_search", "drop_tokens_threshold", "typo_tokens_threshold"
]

const normalise = (key: string) => key.toLowerCase().replace(/[_-]/g, "")
const selecting = new Set(documentSelectingParams.map(normalise))

/** Splits engineParams into the forwarded ones and the names of the dropped ones. */
export const filterEngineParams = (
  params: Readonly<Record<string, unknown>>,
  allowed: ReadonlySet<string>
): { readonly kept: Record<string, unknown>; readonly dropped: ReadonlyArray<string> } => {
  const kept: Record<string, unknown> = {}
  const dropped: Array<string> = []
  for (const key of Object.keys(params)) {
    if (allowed.has(key) && !selecting.has(normalise(key))) {
      Object.defineProperty(kept, key, { value: params[key], enumerable: true, writable: true, configurable: true })
    } else dropped.push(key)
  }
  return { kept, dropped }
}

const checkField = (index: Resolved, field: string, usage: "filter" | "facet" | "highlight") => {
  const reject = (reason: string) => Effect.fail(new SearchFieldRejected({ index: index.name, field, usage, reason }))
  if (!fieldPattern.test(field)) return reject("not a field name (^[A-Za-z_][A-Za-z0-9_.]*$)")
  const tenant = index.spec.tenantField
  if (field === tenant || field.startsWith(`${tenant}.`)) return reject("the tenant field cannot be named by a caller")
  if (index.queryableFields !== undefined && !index.queryableFields.has(field)) return reject("not one of queryableFields")
  return Effect.void
}

/**
 * Why an ISO-8601 filter value names no single instant, or undefined when it does: a date-time
 * without a zone (`Date.parse` reads it in the process's local zone, so the same query would answer
 * differently on servers in different zones), or a day or time that does not exist (`Date.parse`
 * rolls 2026-02-30 over to 2 March). A date alone is UTC midnight.
 */
const instantRefusal = (text: string): string | undefined =>
  Either.match(IsoInstant.parse(text, "refuse"), {
    onLeft: (refusal) =>
      refusal === "not-iso"
        ? "not an ISO-8601 date"
        : refusal === "zone-missing"
        ? "a date-time needs its time zone (Z or an offset such as +02:00)"
        : "the day or time does not exist",
    onRight: () => undefined
  })

/**
 * Why a caller's text cannot be searched for, or undefined when it can: a NUL character (PostgreSQL
 * cannot store one, so no document there holds it) or a lone surrogate (not Unicode: a driver would
 * replace it with U+FFFD and match that). Refused on every backend, so the same input gets the same
 * answer everywhere.
 */
export const textRefusal = (text: string): string | undefined =>
  text.includes("\u0000")
    ? "contains a NUL character (U+0000)"
    : loneSurrogate.test(text)
    ? "is not valid Unicode (a lone surrogate)"
    : undefined

const loneSurrogate = /[\uD800-\uDFFF]/u

const isScalar = (value: unknown): value is Scalar =>
  typeof value === "string" || typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value))

/**
 * Validates `input` for `subject` against the declared indexes. Fails `SearchIndexNotFound`,
 * `SearchFieldRejected`, `SearchQueryInvalid` or `SearchTenantMissing`; logs dropped engineParams.
 */
export const validate = (
  indexes: ReadonlyMap<string, Resolved>,
  allowedEngineParams: ReadonlySet<string>,
  input: Input,
  subject: Subject
) =>
  Effect.gen(function*() {
    const index = indexes.get(input.index)
    if (index === undefined) return yield* Effect.fail(new SearchIndexNotFound({ index: input.index }))
    const invalid = (reason: string) => Effect.fail(new SearchQueryInvalid({ index: index.name, reason }))
    const checkText = (what: string, text: string) => {
      const refused = textRefusal(text)
      return refused === undefined ? Effect.void : invalid(`${what} ${refused}`)
    }
    yield* checkText("q", input.q ?? "")
    if (input.highlight !== undefined) {
      yield* checkText("highlight preTag", input.highlight.preTag)
      yield* checkText("highlight postTag", input.highlight.postTag)
    }
    const filters: Array<Filter> = []
    for (const filter of input.filters ?? []) {
      yield* checkField(index, filter.field, "filter")
      for (const value of Array.isArray(filter.value) ? filter.value : [filter.value]) {
        if (typeof value === "string") yield* checkText(`filter "${filter.field}": a value`, value)
      }
      const list = filter.op === "in" || filter.op === "nin"
      if (list) {
        if (!Array.isArray(filter.value) || filter.value.length === 0 || filter.value.length > 1000) {
          return yield* invalid(`filter "${filter.field}" ${filter.op} needs a list of 1 to 1000 values`)
        }
        if (!filter.value.every(isScalar)) return yield* invalid(`filter "${filter.field}": values must be finite scalars`)
      } else {
        if (!isScalar(filter.value)) return yield* invalid(`filter "${filter.field}" ${filter.op} needs one scalar value`)
        if (filter.op !== "eq" && filter.op !== "neq" && typeof filter.value !== "number") {
          if (isoInstant(filter.value) === undefined) {
            return yield* invalid(`filter "${filter.field}" ${filter.op} compares numbers or ISO-8601 dates only`)
          }
          const refused = instantRefusal(filter.value as string)
          if (refused !== undefined) return yield* invalid(`filter "${filter.field}" ${filter.op}: ${refused}`)
        }
      }
      filters.push({ field: filter.field, op: filter.op, value: filter.value })
    }
    for (const field of input.facets ?? []) yield* checkField(index, field, "facet")
    for (const field of input.highlight?.fields ?? []) yield* checkField(index, field, "highlight")
    const tenantId = subject.tenantId
    if (tenantId === null) return yield* Effect.fail(new SearchTenantMissing({ index: index.name }))
    const { dropped, kept } = filterEngineParams(input.engineParams ?? {}, allowedEngineParams)
    if (dropped.length > 0) {
      yield* Effect.logWarning(`search.query on "${index.name}": dropped engineParams not allowed: ${LogText.quoteAll(dropped)}`)
    }
    const query: Query = {
      q: input.q ?? "",
      limit: input.limit ?? 20,
      offset: input.offset ?? 0,
      fuzziness: input.fuzziness ?? "auto",
      // The tenant is injected after validation, so no caller-supplied filter can replace it.
      filters: [{ field: index.spec.tenantField, op: "eq", value: tenantId }, ...filters],
      facets: [...new Set(input.facets ?? [])],
      ...(input.highlight ? { highlight: input.highlight } : {}),
      engineParams: kept
    }
    return { index, query }
  })

/**
 * What a `search.query` caller gets when the backend fails: a `SearchBackendError` with its kind
 * (so its status, 503 or 502), backend, `httpStatus` and `retryAfterMs`, and a message of ours. The
 * backend's own message (a driver's or an engine's text, which can quote the query or name
 * internals) is logged with the trace id and never sent. Any other failure of a custom backend
 * counts as transient.
 */
export const backendFailure = (backend: string, index: string, traceId: string) => (error: unknown) => {
  const kind = error instanceof SearchBackendError ? error.kind : "transient"
  const name = error instanceof SearchBackendError ? error.backend : backend
  const safe = new SearchBackendError({
    kind,
    backend: name,
    operation: "query",
    message: `the search backend could not answer (${kind}); the server log has the cause under trace id ${traceId}`,
    ...(error instanceof SearchBackendError && error.httpStatus !== undefined ? { httpStatus: error.httpStatus } : {}),
    ...(error instanceof SearchBackendError && error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {})
  })
  return Effect.logError(`search.query on index ${JSON.stringify(index)}: the ${name} backend failed`, Cause.fail(error)).pipe(
    Effect.annotateLogs({ traceId }),
    Effect.zipRight(Effect.fail(safe))
  )
}
