/**
 * engineB (Meilisearch) over the official `meilisearch` client (optional peer dependency, loaded
 * on first use). Every write is an asynchronous task: a write counts as done only when its task
 * succeeded (a failed task is a permanent failure, a task not finished in time a transient one).
 * Document ids are base64url-encoded into the primary key `__fw_pk` (Meilisearch accepts only
 * `[A-Za-z0-9_-]`); string equality goes through the shadow fields of `EngineSupport` because
 * Meilisearch compares strings case-insensitively. Typo tolerance is an index setting, so
 * `fuzziness: 0` quotes each word (phrase search is exact) and other values keep the engine's
 * tolerance (spec 2.3), set to 1 typo from 3 letters and 2 from 6. A reindex fills a fresh index
 * and swaps it with the live one (`/swap-indexes`).
 */
import type { Scope } from "effect"
import { Chunk, Effect, Layer, Option, Stream } from "effect"
import type { Meilisearch, Task } from "meilisearch"
import type { SearchBackendError } from "./Errors.js"
import type { Clause, EngineBackend, EngineTuning } from "./EngineSupport.js"
import { backendError, decodeFacetCounts, emptyResult, eqField, filterableFields, highlightedHit, hostOf, lazyModule, presentationParams, reservedFieldOf, retryAfterMs, searchableFields, sentinelPost, sentinelPre, shadowClause, stripShadows, tsField, withShadows } from "./EngineSupport.js"
import type { Document, IndexSpec, Query, Rebuild, Result, WriteOp, WriteResult } from "./SearchBackend.js"
import { readPath, SearchBackend } from "./SearchBackend.js"

/** engineB configuration (`{engine: 'engineB', url, apiKey}`). */
export interface EngineBConfig extends EngineTuning {
  /** The Meilisearch URL, e.g. `https://ms.example.com`. */
  readonly url: string
  readonly apiKey: string
}

const NAME = "engineB"
/** The primary key: the base64url of the document id. */
export const PRIMARY_KEY = "__fw_pk"

/** Search parameters a caller may pass through `engineParams` (presentation only). */
export const allowedParams: ReadonlySet<string> = new Set(["attributesToCrop", "cropLength", "cropMarker"])

/** Document-selecting keys (spec 7.1): dropped even when the plugin's allow-list names them. */
export const documentSelectingParams: ReadonlyArray<string> = [
  "q", "filter", "facets", "attributesToSearchOn", "matchingStrategy", "rankingScoreThreshold", "hybrid", "vector",
  "distinct", "sort", "offset", "limit", "page", "hitsPerPage", "attributesToRetrieve", "locales", "retrieveVectors"
]

/** A string in Meilisearch filter syntax: double-quoted, `\` and `"` escaped. */
export const quoteValue = (value: string): string => `"${value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"")}"`

/** The primary key of a document id. */
export const encodeId = (id: string): string => Buffer.from(id, "utf8").toString("base64url")

/** One filter clause in Meilisearch syntax (`undefined`: it drops out). */
export const compileClause = (clause: Clause): string | undefined => {
  switch (clause.kind) {
    case "always":
    case "never":
      return undefined
    case "codes": {
      const field = quoteValue(clause.field)
      if (clause.codes.length === 1) return `${field} ${clause.negate ? "!=" : "="} ${quoteValue(clause.codes[0]!)}`
      return `${field} ${clause.negate ? "NOT IN" : "IN"} [${clause.codes.map(quoteValue).join(", ")}]`
    }
    case "range":
      return `${quoteValue(clause.field)} ${{ gt: ">", gte: ">=", lt: "<", lte: "<=" }[clause.op]} ${clause.value}`
  }
}

/** The query text: each word quoted when typos are off (phrase search is exact). */
export const queryText = (q: string, fuzziness: Query["fuzziness"]): string => {
  const words = q.replace(/"/g, " ").split(/\s+/).filter((w) => w !== "")
  return fuzziness === 0 ? words.map((w) => `"${w}"`).join(" ") : words.join(" ")
}

/** The index settings of a spec. */
export const settingsOf = (spec: IndexSpec) => {
  const filterable = filterableFields(spec).flatMap((f) => [eqField(f), tsField(f), f])
  const searchable = searchableFields(spec)
  return {
    searchableAttributes: searchable.length > 0 ? searchable : ["*"],
    filterableAttributes: filterable,
    sortableAttributes: ["id"],
    typoTolerance: { enabled: true, minWordSizeForTypos: { oneTypo: 3, twoTypos: 6 } },
    faceting: { maxValuesPerFacet: 1000 },
    pagination: { maxTotalHits: 100_000 }
  }
}

/** Classifies a meilisearch-js failure (notes §1.6). */
export const classify = (operation: string, error: unknown): SearchBackendError => {
  const e = error as { name?: string; message?: string; response?: { status?: number; headers?: { get?: (h: string) => string | null } } }
  if (e?.name === "MeilisearchApiError" && typeof e.response?.status === "number") {
    return backendError(NAME, operation, `Meilisearch: ${e.message ?? ""}`, {
      status: e.response.status,
      retryAfterMs: retryAfterMs(e.response.headers?.get?.("retry-after"))
    })
  }
  // MeilisearchRequestError (network), MeilisearchRequestTimeOutError, MeilisearchTaskTimeOutError:
  // nothing says the engine refused; a retry can succeed.
  const cause = (error as { cause?: { code?: unknown; name?: unknown; cause?: { code?: unknown } } })?.cause
  const detail = cause?.code ?? cause?.cause?.code ?? cause?.name
  return backendError(NAME, operation, `Meilisearch: ${e?.message ?? String(error)}${detail === undefined ? "" : ` (${String(detail)})`}`, { kind: "transient" })
}

const written: WriteResult = { refused: [] }

/** Builds the engineB backend. */
export const make = (config: EngineBConfig): EngineBackend => {
  const timeoutMs = config.timeoutMs ?? 5000
  const taskTimeoutMs = config.taskTimeoutMs ?? 30_000
  const load = lazyModule(NAME, "meilisearch", () => import("meilisearch"))
  let client: Meilisearch | undefined
  const specs = new Map<string, IndexSpec>()
  let generation = 0

  const call = <A>(operation: string, f: (c: Meilisearch) => Promise<A>): Effect.Effect<A, SearchBackendError> =>
    Effect.flatMap(load(operation), (mod) => {
      client ??= new mod.Meilisearch({ host: config.url, apiKey: config.apiKey, timeout: timeoutMs })
      const c = client
      return Effect.tryPromise({ try: () => f(c), catch: (error) => classify(operation, error) })
    })

  /** Runs a write and waits for its task: done only when the engine says it succeeded. */
  const task = (operation: string, f: (c: Meilisearch) => Promise<{ taskUid: number }> & { waitTask: (o?: { timeout?: number; interval?: number }) => Promise<Task> }) =>
    Effect.flatMap(call(operation, (c) => f(c).waitTask({ timeout: taskTimeoutMs, interval: 50 })), (t) => {
      if (t.status === "succeeded") return Effect.void
      const error = t.error as { code?: string; type?: string; message?: string } | null | undefined
      const transient = t.status === "canceled" || error?.type === "internal" || error?.type === "system"
      return Effect.fail(backendError(NAME, operation, `Meilisearch task ${t.uid} ${t.status}: ${error?.code ?? ""} ${error?.message ?? ""}`.trim(), {
        kind: transient ? "transient" : "permanent"
      }))
    })

  const specOf = (index: string, operation: string) => {
    const spec = specs.get(index)
    return spec ? Effect.succeed(spec) : Effect.fail(backendError(NAME, operation, `index "${index}" was not ensured`, { kind: "permanent" }))
  }

  const prepare = (spec: IndexSpec, docs: ReadonlyArray<Document>, operation: string) =>
    Effect.forEach(docs, (doc) => {
      const reserved = reservedFieldOf(doc)
      if (reserved !== undefined) return Effect.fail(backendError(NAME, operation, `document "${doc.id}" has the reserved field "${reserved}"`, { kind: "permanent" }))
      const pk = encodeId(doc.id)
      if (pk.length > 511) return Effect.fail(backendError(NAME, operation, `document id "${doc.id.slice(0, 40)}…" is too long for Meilisearch (511 bytes once encoded)`, { kind: "permanent" }))
      return Effect.succeed({ ...withShadows(spec, doc), [PRIMARY_KEY]: pk })
    })

  const createIndex = (uid: string, spec: IndexSpec, operation: string) =>
    Effect.zipRight(
      task(operation, (c) => c.createIndex(uid, { primaryKey: PRIMARY_KEY })),
      task(operation, (c) => c.index(uid).updateSettings(settingsOf(spec)))
    )

  const upsertInto = (uid: string, spec: IndexSpec, docs: ReadonlyArray<Document>) =>
    docs.length === 0 ? Effect.void : Effect.flatMap(prepare(spec, docs, "upsert"), (prepared) =>
      task("upsert", (c) => c.index(uid).addDocuments(prepared, { primaryKey: PRIMARY_KEY })))

  const removeFrom = (uid: string, ids: ReadonlyArray<string>) =>
    ids.length === 0 ? Effect.void : task("remove", (c) => c.index(uid).deleteDocuments(ids.map(encodeId)))

  /**
   * A batch: one document task and one deletion task, sent together and awaited together (the
   * ids are distinct, so their order does not matter). Meilisearch fails a document task as a
   * whole for one bad document: the sync engine then splits the batch.
   */
  const writeInto = (uid: string, spec: IndexSpec, ops: ReadonlyArray<WriteOp>) => {
    const docs: Array<Document> = []
    const removed: Array<string> = []
    for (const op of ops) {
      if (op.doc === null) removed.push(op.id)
      else docs.push(op.doc)
    }
    return Effect.as(Effect.all([upsertInto(uid, spec, docs), removeFrom(uid, removed)], { concurrency: 2, discard: true }), written)
  }

  const query = (index: string, query: Query): Effect.Effect<Result, SearchBackendError> =>
    Effect.gen(function*() {
      const spec = yield* specOf(index, "query")
      const clauses = query.filters.map((f) => shadowClause(spec, f))
      if (clauses.some((c) => c.kind === "never")) return emptyResult(query)
      const filter = clauses.flatMap((c) => {
        const s = compileClause(c)
        return s === undefined ? [] : [s]
      })
      const extra = yield* presentationParams(NAME, query.engineParams, allowedParams)
      const response = yield* call("query", (c) =>
        c.index(index).search(queryText(query.q, query.fuzziness), {
          ...extra,
          filter,
          offset: query.offset,
          limit: query.limit,
          sort: ["id:asc"],
          ...(query.facets.length === 0 ? {} : { facets: query.facets.map(eqField) }),
          ...(query.highlight
            ? { attributesToHighlight: [...query.highlight.fields], highlightPreTag: sentinelPre, highlightPostTag: sentinelPost }
            : {})
        }))
      const hits = response.hits.map((raw) => {
        const { _formatted: formatted, ...rest } = raw as Record<string, unknown> & { _formatted?: Record<string, unknown> }
        const doc = stripShadows(rest, ["_rankingScore", "_rankingScoreDetails", "_matchesPosition"])
        return highlightedHit(doc, query.highlight, formatted && ((field) => {
          const marked = readPath(formatted, field)
          return Array.isArray(marked) ? marked.map(String) : typeof marked === "string" ? marked : undefined
        }))
      })
      const distribution = (response.facetDistribution ?? {}) as Record<string, Record<string, number>>
      const facets = Object.fromEntries(query.facets.map((f) => [f, decodeFacetCounts(distribution[eqField(f)])]))
      return { hits, facets, found: response.estimatedTotalHits ?? hits.length }
    })

  const backend: EngineBackend = {
    name: NAME,
    durable: true,
    outboundHosts: [hostOf(config.url)],
    ensureIndex: (spec) =>
      Effect.gen(function*() {
        specs.set(spec.index, spec)
        const exists = yield* call("ensureIndex", (c) => c.getRawIndex(spec.index)).pipe(
          Effect.as(true),
          Effect.catchIf((e) => e.httpStatus === 404, () => Effect.succeed(false))
        )
        if (!exists) yield* task("ensureIndex", (c) => c.createIndex(spec.index, { primaryKey: PRIMARY_KEY }))
        // Settings are applied every time: a changed spec takes effect (an async, idempotent task).
        yield* task("ensureIndex", (c) => c.index(spec.index).updateSettings(settingsOf(spec)))
      }),
    upsert: (index, docs) => Effect.flatMap(specOf(index, "upsert"), (spec) => upsertInto(index, spec, docs)),
    remove: (index, ids) => removeFrom(index, ids),
    write: (index, ops) => Effect.flatMap(specOf(index, "write"), (spec) => writeInto(index, spec, ops)),
    query,
    documents: (index) =>
      Stream.paginateChunkEffect(0, (offset) =>
        Effect.map(call("documents", (c) => c.index(index).getDocuments({ offset, limit: 1000 })), (page) => {
          const docs = page.results.map((d) => stripShadows(d as Record<string, unknown>))
          return [Chunk.fromIterable(docs), offset + docs.length < page.total && docs.length > 0 ? Option.some(offset + docs.length) : Option.none()] as const
        })),
    rebuild: (spec): Effect.Effect<Rebuild, SearchBackendError, Scope.Scope> =>
      Effect.gen(function*() {
        specs.set(spec.index, spec)
        const fresh = `${spec.index}__fw_rebuild_${Date.now().toString(36)}${(generation++).toString(36)}`
        yield* createIndex(fresh, spec, "reindex")
        let settled = false
        const drop = (uid: string) => Effect.ignore(task("reindex", (c) => c.deleteIndex(uid)))
        const abort = Effect.suspend(() => (settled ? Effect.void : (settled = true, drop(fresh))))
        yield* Effect.addFinalizer(() => abort)
        return {
          // Once swapped or dropped, `fresh` names the previous generation or nothing: a write there
          // would re-create an index no one drops.
          upsert: (docs) => Effect.suspend(() => settled ? Effect.void : upsertInto(fresh, spec, docs)),
          remove: (ids) => Effect.suspend(() => settled ? Effect.void : removeFrom(fresh, ids)),
          swap: Effect.gen(function*() {
            yield* task("reindex", (c) => c.swapIndexes([{ indexes: [spec.index, fresh], rename: false }]))
            settled = true
            // After the swap `fresh` holds the previous generation.
            yield* drop(fresh)
          }),
          abort
        }
      })
  }
  return backend
}

/** The engineB backend as the `SearchBackend` service. */
export const layer = (config: EngineBConfig): Layer.Layer<SearchBackend> => Layer.succeed(SearchBackend, make(config))

/** The host for the plugin's `network:outbound:<host>` permission. */
export const outboundHost = (config: EngineBConfig): string => hostOf(config.url)
