/**
 * What the three external engine backends (engineA/B/C) share: failure classification into
 * `SearchBackendError` (notes §1.4), lazy loading of the optional client packages, the shadow
 * fields that give every engine the contract's exact, case-sensitive and type-strict equality,
 * highlight post-processing (the document text is HTML-escaped, then the caller's tags go in),
 * and the engineParams gate.
 *
 * Shadow fields (`__fw_*`, reserved: a document field with that prefix is refused): engines
 * compare strings case-insensitively (engineB, engineC facet values) or cannot tell `"15"` from
 * `15`, which would let a tenant id that differs only by case read another tenant's documents.
 * Each filterable field `f` gets `__fw_eq_<f>`: its scalar values encoded as `s<hex utf-8>`,
 * `n<hex JSON>` or `b<true|false>` (lower-case hex, so case folding changes nothing), and
 * `__fw_ts_<f>`: the instants (ms) of ISO-8601 strings, for ordered date filters. Equality,
 * `in`/`nin` and facets read the first, `gt`…`lte` on dates the second, on numbers the field itself.
 */
import { Effect } from "effect"
import * as LogText from "../kernel/LogText.js"
import { SearchBackendError } from "./Errors.js"
import type { Document, Filter, Hit, IndexSpec, Query, Result, Scalar, SearchBackendShape } from "./SearchBackend.js"
import { isoInstant, readPath } from "./SearchBackend.js"

/** An engine backend: the contract plus the hosts it connects to (for `network:outbound:<host>`). */
export interface EngineBackend extends SearchBackendShape {
  /** Host names (no port) this backend sends requests to, derived from its configuration. */
  readonly outboundHosts: ReadonlyArray<string>
}

/** Tuning shared by the engine backends. */
export interface EngineTuning {
  /** Per-request timeout (default 5000 ms). */
  readonly timeoutMs?: number
  /** How long to wait for an asynchronous write task before calling it transient (default 30000 ms). */
  readonly taskTimeoutMs?: number
}

/** The host name of a URL (what `network:outbound:<host>` names). */
export const hostOf = (url: string): string => new URL(url).hostname

/** Statuses a retry can cure: timeouts, rate limits, server errors. */
export const isTransientStatus = (status: number): boolean => status === 408 || status === 429 || status >= 500

/** `Retry-After` (seconds or an HTTP date) in milliseconds. */
export const retryAfterMs = (header: string | null | undefined, now = Date.now()): number | undefined => {
  if (header === null || header === undefined || header.trim() === "") return undefined
  const seconds = Number(header)
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000)
  const at = Date.parse(header)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/** Builds a `SearchBackendError`, kind from the status when there is one (none: network, transient). */
export const backendError = (
  backend: string,
  operation: string,
  message: string,
  options: { readonly status?: number | undefined; readonly kind?: "transient" | "permanent"; readonly retryAfterMs?: number | undefined } = {}
): SearchBackendError =>
  new SearchBackendError({
    backend,
    operation,
    message,
    kind: options.kind ?? (options.status === undefined || isTransientStatus(options.status) ? "transient" : "permanent"),
    ...(options.status === undefined ? {} : { httpStatus: options.status }),
    ...(options.retryAfterMs === undefined ? {} : { retryAfterMs: options.retryAfterMs })
  })

/** Loads an optional client package once, on first use; a missing package is a permanent failure. */
export const lazyModule = <M>(backend: string, pkg: string, load: () => Promise<M>) => {
  let loaded: Promise<M> | undefined
  return (operation: string): Effect.Effect<M, SearchBackendError> =>
    Effect.tryPromise({
      try: () => (loaded ??= load().catch((error: unknown) => {
        loaded = undefined
        throw error
      })),
      catch: (error) =>
        backendError(backend, operation, `the ${backend} backend needs the optional package "${pkg}" (npm install ${pkg}): ${String(error)}`, {
          kind: "permanent"
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Shadow fields

/** The reserved prefix of fields the engine backends add to documents. */
export const reservedPrefix = "__fw_"

const encodeName = (field: string) => field.replace(/_/g, "__").replace(/\./g, "_d")
/** The equality/facet shadow of `field`. */
export const eqField = (field: string): string => `${reservedPrefix}eq_${encodeName(field)}`
/** The instant shadow of `field`. */
export const tsField = (field: string): string => `${reservedPrefix}ts_${encodeName(field)}`

const hex = (s: string) => Buffer.from(s, "utf8").toString("hex")

/** The shadow code of a scalar. */
export const encodeScalar = (value: Scalar): string =>
  typeof value === "string" ? `s${hex(value)}` : typeof value === "number" ? `n${hex(JSON.stringify(value))}` : `b${String(value)}`

/** The facet key (string, JSON text of a number, `true`/`false`) of a shadow code. */
export const decodeScalar = (code: string): string | undefined => {
  const body = code.slice(1)
  switch (code[0]) {
    case "s":
    case "n":
      return /^(?:[0-9a-f]{2})*$/.test(body) ? Buffer.from(body, "hex").toString("utf8") : undefined
    case "b":
      return body
    default:
      return undefined
  }
}

const scalars = (value: unknown): Array<Scalar> =>
  (Array.isArray(value) ? value : [value]).filter((v): v is Scalar =>
    typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v))
  )

/** Fields callers may filter and facet on, the tenant field included. */
export const filterableFields = (spec: IndexSpec): Array<string> => {
  const declared = spec.queryableFields ?? Object.keys(spec.fields ?? {})
  return [...new Set([spec.tenantField, ...declared])]
}

/** Fields `q` searches: declared, else the string fields of `fields` other than `id` and the tenant. */
export const searchableFields = (spec: IndexSpec): Array<string> =>
  spec.searchableFields
    ? [...spec.searchableFields]
    : Object.entries(spec.fields ?? {}).filter(([name, type]) => (type === "string" || type === "string[]") && name !== "id" && name !== spec.tenantField).map(([name]) => name)

/** A document's reserved-prefix field, which the engines' shadows would overwrite: refused. */
export const reservedFieldOf = (doc: Document): string | undefined => Object.keys(doc).find((k) => k.startsWith(reservedPrefix))

/** The document with its shadow fields added. */
export const withShadows = (spec: IndexSpec, doc: Document): Record<string, unknown> => {
  const out: Record<string, unknown> = { ...doc }
  for (const field of filterableFields(spec)) {
    const values = scalars(readPath(doc, field))
    if (values.length > 0) out[eqField(field)] = values.map(encodeScalar)
    const instants = values.flatMap((v) => {
      const ms = isoInstant(v)
      return ms === undefined ? [] : [ms]
    })
    if (instants.length > 0) out[tsField(field)] = instants
  }
  return out
}

/** The document without the engine's additions (shadows, and the keys named in `extra`). */
export const stripShadows = (stored: Record<string, unknown>, extra: ReadonlyArray<string> = []): Document => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(stored)) {
    if (!k.startsWith(reservedPrefix) && !extra.includes(k)) out[k] = v
  }
  return out as unknown as Document
}

/** Facet counts read from shadow codes, keyed by the contract's facet keys. */
export const decodeFacetCounts = (counts: Readonly<Record<string, number>> | undefined): Record<string, number> => {
  // A Map, then own keys: a value such as "__proto__" or "constructor" (a user's tag) is a key like any other.
  const out = new Map<string, number>()
  for (const [code, n] of Object.entries(counts ?? {})) {
    const key = decodeScalar(code)
    if (key !== undefined) out.set(key, (out.get(key) ?? 0) + n)
  }
  return Object.fromEntries(out)
}

/**
 * A filter after type resolution: the engines compile these into their own syntax. `never`
 * means the whole (ANDed) query matches nothing; `always` that the filter drops out.
 */
export type Clause =
  | { readonly kind: "codes"; readonly field: string; readonly negate: boolean; readonly codes: ReadonlyArray<string> }
  | { readonly kind: "range"; readonly field: string; readonly op: "gt" | "gte" | "lt" | "lte"; readonly value: number }
  | { readonly kind: "never" }
  | { readonly kind: "always" }

/**
 * Resolves a filter over the shadow fields: equality-like operators on `__fw_eq_<f>`, ordered
 * ones on `f` (numbers) or `__fw_ts_<f>` (ISO dates). A field the index does not declare as
 * filterable is treated as absent from every document.
 */
export const shadowClause = (spec: IndexSpec, filter: Filter): Clause => {
  const filterable = filterableFields(spec).includes(filter.field)
  const negate = filter.op === "neq" || filter.op === "nin"
  if (!filterable) return negate ? { kind: "always" } : { kind: "never" }
  switch (filter.op) {
    case "eq":
    case "neq":
    case "in":
    case "nin": {
      const codes = scalars(filter.value).map(encodeScalar)
      return { kind: "codes", field: eqField(filter.field), negate, codes }
    }
    default: {
      const value = filter.value
      if (typeof value === "number" && Number.isFinite(value)) return { kind: "range", field: filter.field, op: filter.op, value }
      const instant = isoInstant(value)
      if (instant !== undefined) return { kind: "range", field: tsField(filter.field), op: filter.op, value: instant }
      return { kind: "never" }
    }
  }
}

/** The answer to a query that cannot match (a `never` clause). */
export const emptyResult = (query: Query): Result => ({ hits: [], found: 0, facets: Object.fromEntries(query.facets.map((f) => [f, {}])) })

// ---------------------------------------------------------------------------------------------
// Highlights

/** Tags the engines are asked to put around matches; private-use characters no document text needs. */
export const sentinelPre = "\uE000"
export const sentinelPost = "\uE001"

const escapeHtml = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;")

/**
 * An engine's highlighted text (matches between the sentinels) as the contract's snippet: the
 * text HTML-escaped, then the caller's tags around each match. Undefined when nothing matched.
 */
export const finishHighlight = (marked: string, preTag: string, postTag: string): string | undefined => {
  if (!marked.includes(sentinelPre)) return undefined
  return escapeHtml(marked).replaceAll(sentinelPre, preTag).replaceAll(sentinelPost, postTag)
}

/** Several marked list elements as one snippet (joined with ", ", as the contract says). */
export const finishListHighlight = (marked: ReadonlyArray<string>, preTag: string, postTag: string): string | undefined =>
  marked.some((m) => m.includes(sentinelPre)) ? marked.map((m) => finishHighlight(m, preTag, postTag) ?? escapeHtml(m)).join(", ") : undefined

/**
 * A hit as the contract gives it: the document, with the snippets of the highlighted fields that
 * matched. `marked` reads a field's marked text (a string, or a list's elements) from the engine's
 * answer, undefined where it has none; without it (or without `highlight`) the hit has no snippets.
 */
export const highlightedHit = (
  doc: Document,
  highlight: Query["highlight"],
  marked: ((field: string) => string | ReadonlyArray<string> | undefined) | undefined
): Hit => {
  if (!highlight || marked === undefined) return { doc }
  const highlights: Record<string, string> = {}
  for (const field of highlight.fields) {
    const text = marked(field)
    const done = text === undefined
      ? undefined
      : typeof text === "string"
      ? finishHighlight(text, highlight.preTag, highlight.postTag)
      : finishListHighlight(text, highlight.preTag, highlight.postTag)
    if (done !== undefined) highlights[field] = done
  }
  return Object.keys(highlights).length > 0 ? { doc, highlights } : { doc }
}

// ---------------------------------------------------------------------------------------------
// engineParams

/**
 * Keeps the keys of `params` in the engine's presentation set; everything else (above all the
 * document-selecting keys of spec 7.1, and the keys the backend sets itself) is dropped and logged.
 */
export const presentationParams = (
  backend: string,
  params: Readonly<Record<string, unknown>>,
  allowed: ReadonlySet<string>
): Effect.Effect<Record<string, unknown>> => {
  const kept: Record<string, unknown> = {}
  const dropped: Array<string> = []
  for (const [k, v] of Object.entries(params)) {
    if (allowed.has(k)) kept[k] = v
    else dropped.push(k)
  }
  return dropped.length === 0
    ? Effect.succeed(kept)
    : Effect.as(Effect.logWarning(`search ${backend}: engineParams dropped (not presentation-only for this engine): ${LogText.quoteAll(dropped)}`), kept)
}
