/**
 * engineC (Algolia) over the official `algoliasearch` v5 client (optional peer dependency, loaded
 * on first use). Writes are batches whose `taskID` is awaited until published (a task still
 * unpublished when `taskTimeoutMs` runs out is a transient failure: the outcome is unknown).
 * Algolia compares facet values case-insensitively, so equality and facets use the shadow fields
 * of `EngineSupport`; the tenant shadow is `filterOnly`. Typo budgets map onto
 * `typoTolerance` + `minWordSizefor1Typo/2Typos` (0: off; 1: one typo from 1 letter; 2: two;
 * `auto`: one from 3 letters, two from 6); a swap of neighbours counts as one typo in Algolia.
 * A reindex fills a fresh index and moves it over the live one (`operationIndex` move).
 * The client retries 429 (honouring `Retry-After`) and fails over across hosts itself.
 */
import type { Scope } from "effect"
import { Chunk, Effect, Layer, Option, Stream } from "effect"
import type { Algoliasearch } from "algoliasearch"
import type { SearchBackendError } from "./Errors.js"
import type { Clause, EngineBackend, EngineTuning } from "./EngineSupport.js"
import { backendError, decodeFacetCounts, emptyResult, eqField, filterableFields, highlightedHit, lazyModule, presentationParams, reservedFieldOf, searchableFields, sentinelPost, sentinelPre, shadowClause, stripShadows, withShadows } from "./EngineSupport.js"
import type { Document, IndexSpec, Query, Rebuild, Result, WriteOp, WriteResult } from "./SearchBackend.js"
import { readPath, SearchBackend } from "./SearchBackend.js"

/** engineC configuration (`{engine: 'engineC', appId, apiKey}`). */
export interface EngineCConfig extends EngineTuning {
  readonly appId: string
  readonly apiKey: string
  /**
   * Hosts to use instead of Algolia's (`https://host[:port]`), e.g. a proxy or a test fake.
   * Default: `{appId}.algolia.net`, `{appId}-dsn.algolia.net`, `{appId}-1|2|3.algolianet.com`.
   */
  readonly hosts?: ReadonlyArray<string>
}

const NAME = "engineC"

/** Search parameters a caller may pass through `engineParams` (presentation and analytics only). */
export const allowedParams: ReadonlySet<string> = new Set([
  "analytics", "analyticsTags", "clickAnalytics", "getRankingInfo", "percentileComputation", "attributesToSnippet", "snippetEllipsisText"
])

/** Document-selecting keys (spec 7.1): dropped even when the plugin's allow-list names them. */
export const documentSelectingParams: ReadonlyArray<string> = [
  "query", "filters", "facetFilters", "numericFilters", "tagFilters", "optionalFilters", "restrictSearchableAttributes",
  "enableRules", "ruleContexts", "enablePersonalization", "personalizationImpact", "userToken", "aroundLatLng", "aroundRadius",
  "insideBoundingBox", "insidePolygon", "removeWordsIfNoResults", "optionalWords", "advancedSyntax", "similarQuery",
  "distinct", "attributesToRetrieve", "typoTolerance", "queryType", "page", "hitsPerPage", "offset", "length", "facets",
  "enableReRanking", "reRankingApplyFilter", "relevancyStrictness", "minProximity", "disableTypoToleranceOnAttributes"
]

/** A facet value in Algolia filter syntax: double-quoted, `\` and `"` escaped. */
export const quoteValue = (value: string): string => `"${value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"")}"`

const attr = (name: string) => (/^(AND|OR|NOT|TO)$/i.test(name) ? quoteValue(name) : name)

/** One filter clause in Algolia syntax (`undefined`: it drops out). */
export const compileClause = (clause: Clause): string | undefined => {
  switch (clause.kind) {
    case "always":
    case "never":
      return undefined
    case "codes": {
      const one = (code: string) => `${attr(clause.field)}:${quoteValue(code)}`
      if (clause.negate) return clause.codes.map((c) => `NOT ${one(c)}`).join(" AND ")
      return clause.codes.length === 1 ? one(clause.codes[0]!) : `(${clause.codes.map(one).join(" OR ")})`
    }
    case "range":
      return `${attr(clause.field)} ${{ gt: ">", gte: ">=", lt: "<", lte: "<=" }[clause.op]} ${clause.value}`
  }
}

/** The typo parameters of a fuzziness. */
export const typoParams = (fuzziness: Query["fuzziness"]): Record<string, unknown> => {
  switch (fuzziness) {
    case 0:
      return { typoTolerance: false }
    case 1:
      return { typoTolerance: true, minWordSizefor1Typo: 1, minWordSizefor2Typos: 255 }
    case 2:
      return { typoTolerance: true, minWordSizefor1Typo: 1, minWordSizefor2Typos: 1 }
    default:
      return { typoTolerance: true, minWordSizefor1Typo: 3, minWordSizefor2Typos: 6 }
  }
}

/** The index settings of a spec. */
export const settingsOf = (spec: IndexSpec) => ({
  searchableAttributes: searchableFields(spec),
  attributesForFaceting: filterableFields(spec).map((f) => (f === spec.tenantField ? `filterOnly(${eqField(f)})` : eqField(f))),
  customRanking: ["asc(id)"],
  paginationLimitedTo: 20_000
})

/** Classifies an algoliasearch failure (notes §1.6). */
export const classify = (operation: string, error: unknown): SearchBackendError => {
  const e = error as { name?: string; message?: string; status?: unknown; stackTrace?: ReadonlyArray<{ response?: { status?: number } }> }
  if (e?.name === "RetryError") {
    // Every host failed with a retryable outcome (network, timeout, 5xx).
    const last = e.stackTrace?.at(-1)?.response?.status
    return backendError(NAME, operation, `Algolia unreachable: ${e.message ?? ""}`, { kind: "transient", status: typeof last === "number" && last > 0 ? last : undefined })
  }
  if (typeof e?.status === "number") return backendError(NAME, operation, `Algolia: ${e.message ?? ""}`, { status: e.status })
  return backendError(NAME, operation, `Algolia: ${e?.message ?? String(error)}`, { kind: "transient" })
}

/** Builds the engineC backend. */
export const make = (config: EngineCConfig): EngineBackend => {
  const timeoutMs = config.timeoutMs ?? 5000
  const taskTimeoutMs = config.taskTimeoutMs ?? 30_000
  const load = lazyModule(NAME, "algoliasearch", () => import("algoliasearch"))
  let client: Algoliasearch | undefined
  const specs = new Map<string, IndexSpec>()
  let generation = 0
  const hosts = config.hosts?.map((h) => new URL(h))

  const call = <A>(operation: string, f: (c: Algoliasearch) => Promise<A>): Effect.Effect<A, SearchBackendError> =>
    Effect.flatMap(load(operation), (mod) => {
      client ??= mod.algoliasearch(config.appId, config.apiKey, {
        timeouts: { connect: timeoutMs, read: timeoutMs, write: timeoutMs },
        ...(hosts
          ? {
            hosts: hosts.map((u) => ({
              url: u.hostname,
              accept: "readWrite" as const,
              protocol: u.protocol === "http:" ? "http" as const : "https" as const,
              ...(u.port === "" ? {} : { port: Number(u.port) })
            }))
          }
          : {})
      })
      const c = client
      return Effect.tryPromise({ try: () => f(c), catch: (error) => classify(operation, error) })
    })

  const waitFor = (operation: string, indexName: string, taskID: number) =>
    Effect.asVoid(call(operation, (c) => c.waitForTask({ indexName, taskID, maxRetries: Math.max(1, Math.ceil(taskTimeoutMs / 50)), timeout: () => 50 })))

  const specOf = (index: string, operation: string) => {
    const spec = specs.get(index)
    return spec ? Effect.succeed(spec) : Effect.fail(backendError(NAME, operation, `index "${index}" was not ensured`, { kind: "permanent" }))
  }

  const applySettings = (indexName: string, spec: IndexSpec, operation: string) =>
    Effect.flatMap(call(operation, (c) => c.setSettings({ indexName, indexSettings: settingsOf(spec) })), (r) => waitFor(operation, indexName, r.taskID))

  const batch = (indexName: string, operation: string, requests: ReadonlyArray<{ action: "updateObject" | "deleteObject"; body: Record<string, unknown> }>) =>
    Effect.forEach(chunks(requests, 1000), (part) =>
      Effect.flatMap(call(operation, (c) => c.batch({ indexName, batchWriteParams: { requests: part } })), (r) => waitFor(operation, indexName, r.taskID)), { discard: true })

  const upsertInto = (indexName: string, spec: IndexSpec, docs: ReadonlyArray<Document>) =>
    Effect.flatMap(
      Effect.forEach(docs, (doc) => {
        const reserved = reservedFieldOf(doc) ?? (Object.prototype.hasOwnProperty.call(doc, "objectID") ? "objectID" : undefined)
        return reserved === undefined
          ? Effect.succeed({ action: "updateObject" as const, body: { ...withShadows(spec, doc), objectID: doc.id } })
          : Effect.fail(backendError(NAME, "upsert", `document "${doc.id}" has the reserved field "${reserved}"`, { kind: "permanent" }))
      }),
      (requests) => batch(indexName, "upsert", requests)
    )

  /** A batch: removals and documents in one `batch` request (per 1000 operations), one task each. */
  const writeInto = (indexName: string, spec: IndexSpec, ops: ReadonlyArray<WriteOp>) =>
    Effect.gen(function*() {
      const refused: Array<WriteResult["refused"][number]> = []
      const requests: Array<{ action: "updateObject" | "deleteObject"; body: Record<string, unknown> }> = []
      for (const op of ops) {
        if (op.doc === null) {
          requests.push({ action: "deleteObject", body: { objectID: op.id } })
          continue
        }
        const reserved = reservedFieldOf(op.doc) ?? (Object.prototype.hasOwnProperty.call(op.doc, "objectID") ? "objectID" : undefined)
        if (reserved === undefined) requests.push({ action: "updateObject", body: { ...withShadows(spec, op.doc), objectID: op.id } })
        else refused.push({ id: op.id, error: backendError(NAME, "write", `document "${op.id}" has the reserved field "${reserved}"`, { kind: "permanent" }) })
      }
      if (requests.length > 0) yield* batch(indexName, "write", requests)
      return { refused }
    })

  const removeFrom = (indexName: string, ids: ReadonlyArray<string>) =>
    batch(indexName, "remove", ids.map((id) => ({ action: "deleteObject" as const, body: { objectID: id } })))

  const query = (index: string, query: Query): Effect.Effect<Result, SearchBackendError> =>
    Effect.gen(function*() {
      const spec = yield* specOf(index, "query")
      const clauses = query.filters.map((f) => shadowClause(spec, f))
      if (clauses.some((c) => c.kind === "never")) return emptyResult(query)
      const filters = clauses.flatMap((c) => {
        const s = compileClause(c)
        return s === undefined ? [] : [s]
      }).join(" AND ")
      const extra = yield* presentationParams(NAME, query.engineParams, allowedParams)
      const response = yield* call("query", (c) =>
        c.searchSingleIndex({
          indexName: index,
          searchParams: {
            ...extra,
            query: query.q,
            ...(filters === "" ? {} : { filters }),
            ...typoParams(query.fuzziness),
            queryType: "prefixNone",
            offset: query.offset,
            length: query.limit,
            ...(query.facets.length === 0 ? {} : { facets: query.facets.map(eqField), maxValuesPerFacet: 1000 }),
            attributesToHighlight: query.highlight ? [...query.highlight.fields] : [],
            ...(query.highlight ? { highlightPreTag: sentinelPre, highlightPostTag: sentinelPost } : {})
          }
        }))
      const hits = response.hits.map((raw) => {
        const { _highlightResult: hl, ...rest } = raw as unknown as Record<string, unknown> & { _highlightResult?: Record<string, unknown> }
        const doc = stripShadows(rest, ["objectID", "_snippetResult", "_rankingInfo", "_distinctSeqID"])
        return highlightedHit(doc, query.highlight, hl && ((field) => {
          const h = readPath(hl, field)
          return Array.isArray(h)
            ? h.map((x) => String((x as { value?: unknown }).value ?? ""))
            : h && typeof h === "object" && (h as { matchLevel?: string }).matchLevel !== "none"
            ? String((h as { value?: unknown }).value ?? "")
            : undefined
        }))
      })
      const counted = (response.facets ?? {}) as Record<string, Record<string, number>>
      const facets = Object.fromEntries(query.facets.map((f) => [f, decodeFacetCounts(counted[eqField(f)])]))
      return { hits, facets, found: response.nbHits ?? hits.length }
    })

  const backend: EngineBackend = {
    name: NAME,
    durable: true,
    outboundHosts: hosts
      ? hosts.map((u) => u.hostname)
      : [`${config.appId}.algolia.net`, `${config.appId}-dsn.algolia.net`, ...[1, 2, 3].map((n) => `${config.appId}-${n}.algolianet.com`)],
    ensureIndex: (spec) =>
      Effect.suspend(() => {
        specs.set(spec.index, spec)
        // Settings create the index and are applied every time: a changed spec takes effect.
        return applySettings(spec.index, spec, "ensureIndex")
      }),
    upsert: (index, docs) => (docs.length === 0 ? Effect.void : Effect.flatMap(specOf(index, "upsert"), (spec) => upsertInto(index, spec, docs))),
    remove: (index, ids) => (ids.length === 0 ? Effect.void : removeFrom(index, ids)),
    write: (index, ops) => (ops.length === 0 ? Effect.succeed({ refused: [] }) : Effect.flatMap(specOf(index, "write"), (spec) => writeInto(index, spec, ops))),
    query,
    documents: (index) =>
      Stream.paginateChunkEffect(undefined as string | undefined | null, (cursor) =>
        Effect.map(
          call("documents", (c) => c.browse({ indexName: index, browseParams: { hitsPerPage: 1000, ...(cursor ? { cursor } : {}) } })),
          (page) => {
            const docs = page.hits.map((h) => stripShadows(h as unknown as Record<string, unknown>, ["objectID"]))
            return [Chunk.fromIterable(docs), page.cursor ? Option.some(page.cursor) : Option.none()] as const
          }
        )),
    rebuild: (spec): Effect.Effect<Rebuild, SearchBackendError, Scope.Scope> =>
      Effect.gen(function*() {
        specs.set(spec.index, spec)
        const fresh = `${spec.index}__fw_rebuild_${Date.now().toString(36)}${(generation++).toString(36)}`
        yield* applySettings(fresh, spec, "reindex")
        let settled = false
        const drop = Effect.ignore(Effect.flatMap(call("reindex", (c) => c.deleteIndex({ indexName: fresh })), (r) => waitFor("reindex", fresh, r.taskID)))
        const abort = Effect.suspend(() => (settled ? Effect.void : (settled = true, drop)))
        yield* Effect.addFinalizer(() => abort)
        return {
          // Once moved or dropped, `fresh` names nothing: a write there would re-create an index no one drops.
          upsert: (docs) => Effect.suspend(() => (docs.length === 0 || settled ? Effect.void : upsertInto(fresh, spec, docs))),
          remove: (ids) => Effect.suspend(() => (ids.length === 0 || settled ? Effect.void : removeFrom(fresh, ids))),
          // The move replaces the live index (documents and settings) atomically and removes `fresh`.
          swap: Effect.gen(function*() {
            const r = yield* call("reindex", (c) => c.operationIndex({ indexName: fresh, operationIndexParams: { operation: "move", destination: spec.index } }))
            settled = true
            yield* waitFor("reindex", fresh, r.taskID)
          }),
          abort
        }
      })
  }
  return backend
}

const chunks = <A>(items: ReadonlyArray<A>, size: number): Array<Array<A>> => {
  const out: Array<Array<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** The engineC backend as the `SearchBackend` service. */
export const layer = (config: EngineCConfig): Layer.Layer<SearchBackend> => Layer.succeed(SearchBackend, make(config))

/** The hosts for the plugin's `network:outbound:<host>` permissions. */
export const outboundHosts = (config: EngineCConfig): ReadonlyArray<string> => make(config).outboundHosts
