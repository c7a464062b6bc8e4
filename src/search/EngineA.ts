/**
 * engineA (Typesense) over the official `typesense` client (optional peer dependency, loaded on
 * first use). The index name is a Typesense alias to a physical collection generation, so a
 * reindex builds a fresh collection and swaps the alias. Dates are indexed as epoch-ms shadows;
 * string filter values are backtick-quoted, and a value containing a backtick, which Typesense
 * cannot escape (typesense/typesense#196), is refused. The client's own retries are off
 * (`numRetries: 0`): the plugin's backoff is the only retry layer.
 */
import type { Scope } from "effect"
import { Effect, Layer, Stream } from "effect"
import type { Client as TypesenseClient } from "typesense"
import type { SearchBackendError } from "./Errors.js"
import type { EngineBackend, EngineTuning } from "./EngineSupport.js"
import { backendError, emptyResult, finishHighlight, finishListHighlight, hostOf, lazyModule, presentationParams, reservedFieldOf, searchableFields, sentinelPost, sentinelPre, stripShadows, tsField } from "./EngineSupport.js"
import type { Document, Filter, IndexSpec, Query, Rebuild, Result, Scalar, WriteOp, WriteResult } from "./SearchBackend.js"
import { isoInstant, maxEdits, readPath, SearchBackend } from "./SearchBackend.js"

/** engineA configuration (`{engine: 'engineA', url, apiKey}`). */
export interface EngineAConfig extends EngineTuning {
  /** The Typesense node, e.g. `https://search.example.com:8108`. */
  readonly url: string
  readonly apiKey: string
}

const NAME = "engineA"
/** The sort key: the id (Typesense cannot sort on `id`). */
const SORT_FIELD = "__fw_sort"

/** Search parameters a caller may pass through `engineParams` (presentation and ranking only). */
export const allowedParams: ReadonlySet<string> = new Set([
  "snippet_threshold",
  "highlight_affix_num_tokens",
  "search_cutoff_ms",
  "use_cache",
  "cache_ttl",
  "prioritize_exact_match",
  "prioritize_token_position",
  "prioritize_num_matching_fields"
])

/** Document-selecting keys (spec 7.1): dropped even when the plugin's allow-list names them. */
export const documentSelectingParams: ReadonlyArray<string> = [
  "q", "query_by", "query_by_weights", "filter_by", "preset", "pinned_hits", "hidden_hits", "enable_overrides",
  "override_tags", "filter_curated_hits", "facet_query", "vector_query", "voice_query", "group_by", "drop_tokens_threshold",
  "num_typos", "typo_tokens_threshold", "include_fields", "exclude_fields", "collection", "conversation", "nl_query"
]

/** A string filter value in Typesense syntax, or undefined when it cannot be expressed (a backtick). */
export const quoteValue = (value: string): string | undefined => (value.includes("`") ? undefined : `\`${value}\``)

type TsField = { name: string; type: string; optional: boolean; facet?: boolean; sort?: boolean; index?: boolean }

/** The collection schema of an index spec. */
export const collectionFields = (spec: IndexSpec): Array<TsField> => {
  const types = spec.fields ?? {}
  const queryable = new Set(spec.queryableFields ?? Object.keys(types))
  const searchable = new Set(searchableFields(spec))
  const names = new Set([spec.tenantField, ...queryable, ...searchable])
  const out: Array<TsField> = [{ name: SORT_FIELD, type: "string", optional: false, sort: true }]
  for (const name of names) {
    if (name === "id") continue
    const declared = types[name] ?? (searchable.has(name) || name === spec.tenantField ? "string" : undefined)
    const type = declared === "number" ? "float" : declared === "boolean" ? "bool" : declared === "string[]" ? "string[]" : declared === undefined ? "auto" : "string"
    out.push({ name, type, optional: true, facet: queryable.has(name) && name !== spec.tenantField })
    if (declared === "date") out.push({ name: tsField(name), type: "int64", optional: true })
  }
  return out
}

/** Compiles the filters into `filter_by`; `never` when they cannot match; fails on a backtick. */
export const compileFilters = (spec: IndexSpec, filters: ReadonlyArray<Filter>): { readonly never: boolean; readonly filterBy: string; readonly refused?: string } => {
  const types = spec.fields ?? {}
  const known = new Set(collectionFields(spec).map((f) => f.name))
  const parts: Array<string> = []
  for (const filter of filters) {
    const negate = filter.op === "neq" || filter.op === "nin"
    if (!known.has(filter.field) || filter.field === "id") {
      if (negate) continue
      return { never: true, filterBy: "" }
    }
    const type = types[filter.field] ?? (filter.field === spec.tenantField ? "string" : undefined)
    const values: Array<Scalar> = Array.isArray(filter.value) ? [...filter.value as ReadonlyArray<Scalar>] : [filter.value as Scalar]
    if (filter.op === "gt" || filter.op === "gte" || filter.op === "lt" || filter.op === "lte") {
      const op = { gt: ">", gte: ">=", lt: "<", lte: "<=" }[filter.op]
      const v = values[0]
      if (type === "date") {
        const instant = isoInstant(v)
        if (instant === undefined) return { never: true, filterBy: "" }
        parts.push(`${tsField(filter.field)}:${op}${instant}`)
      } else if ((type === "number" || type === undefined) && typeof v === "number" && Number.isFinite(v)) {
        parts.push(`${filter.field}:${op}${v}`)
      } else return { never: true, filterBy: "" }
      continue
    }
    // Equality family: keep the values of the field's type (a string never equals a number).
    const fits = (v: Scalar) =>
      type === "number" ? typeof v === "number" && Number.isFinite(v) : type === "boolean" ? typeof v === "boolean" : typeof v === "string"
    const kept = values.filter(fits)
    if (kept.length === 0) {
      if (negate) continue
      return { never: true, filterBy: "" }
    }
    const literals: Array<string> = []
    for (const v of kept) {
      if (typeof v === "string") {
        const quoted = quoteValue(v)
        if (quoted === undefined) return { never: false, filterBy: "", refused: filter.field }
        literals.push(quoted)
      } else literals.push(String(v))
    }
    const list = literals.length === 1 && (filter.op === "eq" || filter.op === "neq") ? literals[0]! : `[${literals.join(",")}]`
    parts.push(`${filter.field}:${negate ? "!=" : "="}${list}`)
  }
  return { never: false, filterBy: parts.join(" && ") }
}

/** The typo parameters for a fuzziness: numeric counts are exact edit distances, `auto` grows with length. */
export const typoParams = (fuzziness: Query["fuzziness"]): Record<string, number> =>
  fuzziness === "auto"
    ? { num_typos: 2, min_len_1typo: 3, min_len_2typo: 6 }
    : { num_typos: maxEdits(fuzziness, ""), min_len_1typo: 1, min_len_2typo: 1 }

/** Query text without Typesense operators (`-` exclusion, `"` phrases, `*`, backticks). */
const plainQuery = (q: string) =>
  q.replace(/["*`]/g, " ").split(/\s+/).map((t) => t.replace(/^-+/, "")).filter((t) => t !== "").join(" ")

const statusOf = (error: unknown): number | undefined => {
  const status = (error as { httpStatus?: unknown }).httpStatus
  return typeof status === "number" ? status : undefined
}

/** Classifies a typesense-js failure (notes §1.6). */
export const classify = (operation: string, error: unknown): SearchBackendError => {
  const e = error as { name?: string; message?: string; importResults?: ReadonlyArray<{ success: boolean; error?: string }> }
  if (e?.name === "ImportError" && Array.isArray(e.importResults)) {
    const failed = e.importResults.filter((r) => !r.success)
    return backendError(NAME, operation, `Typesense refused ${failed.length} document(s): ${failed.map((r) => r.error).slice(0, 3).join("; ")}`, { kind: "permanent" })
  }
  const status = statusOf(error)
  return backendError(NAME, operation, `Typesense: ${e?.message ?? String(error)}`, { status })
}

/** Builds the engineA backend. */
export const make = (config: EngineAConfig): EngineBackend => {
  const timeoutMs = config.timeoutMs ?? 5000
  const url = new URL(config.url)
  const load = lazyModule(NAME, "typesense", () => import("typesense"))
  let client: TypesenseClient | undefined
  const specs = new Map<string, IndexSpec>()
  let generation = 0

  const call = <A>(operation: string, f: (c: TypesenseClient) => Promise<A>): Effect.Effect<A, SearchBackendError> =>
    Effect.flatMap(load(operation), (mod) => {
      client ??= new ((mod as unknown as { default?: typeof mod }).default ?? mod).Client({
        nodes: [{ host: url.hostname, port: Number(url.port || (url.protocol === "https:" ? 443 : 80)), protocol: url.protocol.replace(":", "") }],
        apiKey: config.apiKey,
        connectionTimeoutSeconds: timeoutMs / 1000,
        numRetries: 0,
        retryIntervalSeconds: 0.1,
        logLevel: "silent"
      })
      const c = client
      return Effect.tryPromise({ try: () => f(c), catch: (error) => classify(operation, error) })
    })

  const createCollection = (spec: IndexSpec, operation: string) => {
    const name = `${spec.index}__g${Date.now().toString(36)}${(generation++).toString(36)}`
    return Effect.as(call(operation, (c) => c.collections().create({ name, fields: collectionFields(spec) as never })), name)
  }

  const prepare = (spec: IndexSpec, docs: ReadonlyArray<Document>, operation: string) =>
    Effect.forEach(docs, (doc) => {
      const reserved = reservedFieldOf(doc)
      if (reserved !== undefined) return Effect.fail(backendError(NAME, operation, `document "${doc.id}" has the reserved field "${reserved}"`, { kind: "permanent" }))
      const out: Record<string, unknown> = { ...doc, [SORT_FIELD]: doc.id }
      for (const [field, type] of Object.entries(spec.fields ?? {})) {
        if (type !== "date") continue
        const instant = isoInstant(readPath(doc, field))
        if (instant !== undefined) out[tsField(field)] = instant
      }
      return Effect.succeed(out)
    })

  const specOf = (index: string, operation: string) => {
    const spec = specs.get(index)
    return spec ? Effect.succeed(spec) : Effect.fail(backendError(NAME, operation, `index "${index}" was not ensured`, { kind: "permanent" }))
  }

  const importInto = (collection: string, spec: IndexSpec, docs: ReadonlyArray<Document>) =>
    docs.length === 0 ? Effect.void : Effect.flatMap(prepare(spec, docs, "upsert"), (prepared) =>
      Effect.asVoid(call("upsert", (c) => c.collections(collection).documents().import(prepared, { action: "upsert" }))))

  const removeFrom = (collection: string, ids: ReadonlyArray<string>) =>
    Effect.forEach(ids, (id) =>
      call("remove", (c) => c.collections(collection).documents(id).delete()).pipe(
        Effect.asVoid,
        // A missing document is no failure (idempotent remove); a missing collection still is.
        Effect.catchIf((e) => e.httpStatus === 404 && /document/i.test(e.message), () => Effect.void)
      ), { discard: true })

  /**
   * A batch: the removals in one filtered delete (ids with a backtick, which `filter_by` cannot
   * quote, one by one), then the documents in one JSONL import whose per-line results say which
   * documents Typesense refused.
   */
  const writeInto = (collection: string, spec: IndexSpec, ops: ReadonlyArray<WriteOp>) =>
    Effect.gen(function*() {
      const refused: Array<WriteResult["refused"][number]> = []
      const quoted: Array<string> = []
      const unquotable: Array<string> = []
      const docs: Array<Record<string, unknown>> = []
      for (const op of ops) {
        if (op.doc === null) {
          const value = quoteValue(op.id)
          if (value === undefined) unquotable.push(op.id)
          else quoted.push(value)
          continue
        }
        const prepared = Effect.runSync(Effect.either(prepare(spec, [op.doc], "write")))
        if (prepared._tag === "Left") refused.push({ id: op.id, error: prepared.left })
        else docs.push(prepared.right[0]!)
      }
      if (quoted.length > 0) yield* call("write", (c) => c.collections(collection).documents().delete({ filter_by: `id:[${quoted.join(",")}]` }))
      if (unquotable.length > 0) yield* removeFrom(collection, unquotable)
      if (docs.length > 0) {
        const results = yield* call("write", (c) =>
          c.collections(collection).documents().import(docs, { action: "upsert" }).catch((error: unknown) => {
            const results = (error as { name?: string; importResults?: unknown })?.importResults
            if ((error as { name?: string })?.name === "ImportError" && Array.isArray(results)) return results as ReadonlyArray<{ success: boolean; error?: string }>
            throw error
          }))
        results.forEach((result, i) => {
          if (result.success) return
          const id = String(docs[i]?.["id"])
          refused.push({ id, error: backendError(NAME, "write", `Typesense refused document "${id}": ${result.error ?? "no reason given"}`, { kind: "permanent" }) })
        })
      }
      return { refused }
    })

  const searchPage = (index: string, params: Record<string, unknown>) =>
    call("query", (c) => c.collections(index).documents().search(params as never, {}))

  const query = (index: string, query: Query): Effect.Effect<Result, SearchBackendError> =>
    Effect.gen(function*() {
      const spec = yield* specOf(index, "query")
      const compiled = compileFilters(spec, query.filters)
      if (compiled.refused !== undefined) {
        return yield* Effect.fail(backendError(NAME, "query", `engineA cannot express a filter value containing a backtick (field "${compiled.refused}"): refused`, { kind: "permanent" }))
      }
      if (compiled.never) return emptyResult(query)
      const queryBy = searchableFields(spec)
      if (queryBy.length === 0) return yield* Effect.fail(backendError(NAME, "query", `index "${index}" has no searchable fields (declare searchableFields)`, { kind: "permanent" }))
      const extra = yield* presentationParams(NAME, query.engineParams, allowedParams)
      const text = plainQuery(query.q)
      const base: Record<string, unknown> = {
        ...extra,
        q: text === "" ? "*" : text,
        query_by: queryBy.join(","),
        ...typoParams(query.fuzziness),
        typo_tokens_threshold: 1_000_000,
        drop_tokens_threshold: 0,
        prefix: false,
        sort_by: `_text_match:desc,${SORT_FIELD}:asc`,
        ...(compiled.filterBy === "" ? {} : { filter_by: compiled.filterBy }),
        ...(query.facets.length === 0 ? {} : { facet_by: query.facets.join(","), max_facet_values: 1000 }),
        ...(query.highlight
          ? {
            highlight_fields: query.highlight.fields.join(","),
            highlight_full_fields: query.highlight.fields.join(","),
            highlight_start_tag: sentinelPre,
            highlight_end_tag: sentinelPost
          }
          : {})
      }
      // Typesense serves at most 250 hits per request: a wider window is read in pages.
      const hits: Array<Result["hits"][number]> = []
      let found = 0
      let facets: Record<string, Record<string, number>> = {}
      let offset = query.offset
      let remaining = query.limit
      let first = true
      while (first || remaining > 0) {
        const size = Math.min(remaining, 250)
        const page = yield* searchPage(index, { ...base, offset, limit: size })
        if (first) {
          found = page.found
          // Maps, then own keys: a value such as "__proto__" or "constructor" (a user's tag) is a key like any other.
          const byField = new Map<string, Record<string, number>>(query.facets.map((f) => [f, {}]))
          for (const fc of page.facet_counts ?? []) {
            byField.set(fc.field_name, Object.fromEntries(fc.counts.map((c) => [normaliseFacetKey(spec, fc.field_name, c.value), c.count])))
          }
          facets = Object.fromEntries(byField)
          first = false
        }
        for (const hit of page.hits ?? []) {
          const doc = stripShadows(hit.document as Record<string, unknown>)
          const highlights: Record<string, string> = {}
          if (query.highlight) {
            for (const h of (hit.highlights ?? []) as ReadonlyArray<{ field: string; value?: string; snippet?: string; snippets?: ReadonlyArray<string> }>) {
              const value = readPath(doc, h.field)
              const done = Array.isArray(value) && h.snippets
                ? finishListHighlight(markList(value, h.snippets), query.highlight.preTag, query.highlight.postTag)
                : finishHighlight(h.value ?? h.snippet ?? "", query.highlight.preTag, query.highlight.postTag)
              if (done !== undefined) highlights[h.field] = done
            }
          }
          hits.push(query.highlight && Object.keys(highlights).length > 0 ? { doc, highlights } : { doc })
        }
        const got = page.hits?.length ?? 0
        remaining -= got
        offset += got
        if (got < size) break
      }
      return { hits, facets, found }
    })

  const backend: EngineBackend = {
    name: NAME,
    durable: true,
    outboundHosts: [url.hostname],
    ensureIndex: (spec) =>
      Effect.gen(function*() {
        specs.set(spec.index, spec)
        const existing = yield* call("ensureIndex", (c) => c.aliases(spec.index).retrieve()).pipe(
          Effect.map((alias) => alias.collection_name as string | undefined),
          Effect.catchIf((e) => e.httpStatus === 404, () => Effect.succeed(undefined))
        )
        if (existing !== undefined) return
        const name = yield* createCollection(spec, "ensureIndex")
        yield* call("ensureIndex", (c) => c.aliases().upsert(spec.index, { collection_name: name }))
      }),
    upsert: (index, docs) => Effect.flatMap(specOf(index, "upsert"), (spec) => importInto(index, spec, docs)),
    remove: (index, ids) => removeFrom(index, ids),
    write: (index, ops) => Effect.flatMap(specOf(index, "write"), (spec) => writeInto(index, spec, ops)),
    query,
    documents: (index) =>
      Stream.unwrap(
        Effect.map(call("documents", (c) => c.collections(index).documents().export()), (jsonl) =>
          Stream.fromIterable(jsonl.split("\n").filter((l) => l.trim() !== "").map((l) => stripShadows(JSON.parse(l) as Record<string, unknown>))))
      ),
    rebuild: (spec): Effect.Effect<Rebuild, SearchBackendError, Scope.Scope> =>
      Effect.gen(function*() {
        specs.set(spec.index, spec)
        const fresh = yield* createCollection(spec, "reindex")
        let settled = false
        const drop = (name: string) => call("reindex", (c) => c.collections(name).delete()).pipe(Effect.asVoid, Effect.catchIf((e) => e.httpStatus === 404, () => Effect.void))
        const abort = Effect.suspend(() => (settled ? Effect.void : (settled = true, Effect.ignore(drop(fresh)))))
        yield* Effect.addFinalizer(() => abort)
        return {
          upsert: (docs) => importInto(fresh, spec, docs),
          remove: (ids) => removeFrom(fresh, ids),
          swap: Effect.gen(function*() {
            const previous = yield* call("reindex", (c) => c.aliases(spec.index).retrieve()).pipe(
              Effect.map((alias) => alias.collection_name as string | undefined),
              Effect.catchIf((e) => e.httpStatus === 404, () => Effect.succeed(undefined))
            )
            yield* call("reindex", (c) => c.aliases().upsert(spec.index, { collection_name: fresh }))
            settled = true
            if (previous !== undefined && previous !== fresh) yield* drop(previous)
          }),
          abort
        }
      })
  }
  return backend
}

/** Typesense answers number facets as text (`199`, `59.5`, maybe `199.0`): back to JSON text. */
const normaliseFacetKey = (spec: IndexSpec, field: string, value: string): string => {
  const type = spec.fields?.[field]
  if (type === "number") {
    const n = Number(value)
    return Number.isFinite(n) ? JSON.stringify(n) : value
  }
  return value
}

/** List snippets back onto the list: unmatched elements keep their text. */
const markList = (value: ReadonlyArray<unknown>, snippets: ReadonlyArray<string>): Array<string> => {
  const strip = (s: string) => s.replaceAll(sentinelPre, "").replaceAll(sentinelPost, "")
  const pending = [...snippets]
  return value.map((v) => {
    const text = String(v)
    const i = pending.findIndex((s) => strip(s) === text)
    return i < 0 ? text : pending.splice(i, 1)[0]!
  })
}

/** The engineA backend as the `SearchBackend` service. */
export const layer = (config: EngineAConfig): Layer.Layer<SearchBackend> => Layer.succeed(SearchBackend, make(config))

/** The host for the plugin's `network:outbound:<host>` permission. */
export const outboundHost = (config: EngineAConfig): string => hostOf(config.url)
