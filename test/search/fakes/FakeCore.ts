/**
 * What the three fake engines share: an HTTP server on 127.0.0.1 that validates every request
 * against the vendor's OpenAPI spec (a violation answers 400 and is recorded: tests assert none),
 * failure injection (timeouts, 429 with Retry-After, 5xx, 4xx), and a small text matcher
 * (normalised words, typo budgets, prefix, highlights without escaping, as engines do), and
 * timing knobs for benchmarks (`Knobs`: how long a document write task takes, how long before its
 * documents are searchable, and a hook told the moment they are). The knobs default to 0: a write
 * is then applied as it is answered, as the tests expect.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { Engine, SeenRequest } from "./SpecValidator.js"
import { validator } from "./SpecValidator.js"

export type Json = Record<string, unknown>

/** A reply of a fake route. */
export interface Reply {
  readonly status: number
  readonly body?: unknown
  /** Sent verbatim (JSONL answers). */
  readonly raw?: string
  readonly headers?: Readonly<Record<string, string>>
}

/** A fault to inject. */
export interface Fault {
  /** Which requests it hits (default: all). */
  readonly match?: (request: SeenRequest) => boolean
  /** How many requests it hits (default 1; Infinity for "engine down"). */
  times?: number
  /** `hang`: never answer (the client times out); `reset`: destroy the socket. */
  readonly kind: "status" | "hang" | "reset"
  readonly status?: number
  readonly body?: unknown
  readonly retryAfterSeconds?: number
}

/**
 * Timing of document writes, settable while the fake runs. Document write tasks run one after
 * another, as an engine's indexing queue does: each takes `taskLatencyMs` after the previous one
 * ended (or after it arrived, if later); its documents become searchable `publishDelayMs` after
 * that (the publish delay of an engine that replicates before serving, overlapping the next
 * tasks). The task reports done only then.
 */
export interface Knobs {
  taskLatencyMs: number
  publishDelayMs: number
  /**
   * Told, at the moment it happens, of the documents a write made searchable (the live index
   * name as the engine knows it: a Typesense collection, a Meilisearch or Algolia index).
   */
  onVisible: ((index: string, docs: ReadonlyArray<Json>) => void) | undefined
}

/** Knobs at their defaults: no delay, no hook. */
export const knobs = (): Knobs => ({ taskLatencyMs: 0, publishDelayMs: 0, onVisible: undefined })

/** True when document writes must go through `taskQueue` (some delay is set). */
export const delayed = (knobs: Knobs): boolean => knobs.taskLatencyMs > 0 || knobs.publishDelayMs > 0

/**
 * The indexing queue of `Knobs`: `schedule(apply)` runs `apply` when the task's documents become
 * searchable and resolves with its result then. Tasks apply in the order they were scheduled.
 */
export const taskQueue = (knobs: Knobs) => {
  let free = 0
  let last: Promise<unknown> = Promise.resolve()
  return <A>(apply: () => A): Promise<A> => {
    const processed = Math.max(performance.now(), free) + knobs.taskLatencyMs
    free = processed
    const due = processed + knobs.publishDelayMs
    const done = last.then(() => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())))).then(apply)
    last = done.catch(() => undefined)
    return done
  }
}

/** A running fake engine. */
export interface FakeServer {
  /** Timing of document writes (defaults: none). */
  readonly knobs: Knobs
  readonly port: number
  readonly url: string
  /** Every request received, with its spec verdict. */
  readonly requests: Array<SeenRequest & { readonly operationId: string | undefined }>
  /** Requests the vendor's spec does not allow (each also answered 400). */
  readonly violations: Array<string>
  readonly inject: (fault: Fault) => void
  readonly clearFaults: () => void
  readonly close: () => Promise<void>
}

/** The engine-specific part: answers a validated request (later, when a write waits for its task). */
export type Handler = (request: SeenRequest, operationId: string) => Reply | Promise<Reply>

/**
 * Removes what the official client sends outside its vendor's spec, exactly these and nothing
 * broader (the fake must still bite on anything else).
 */
export type Normalise = (request: SeenRequest) => SeenRequest

/** Starts a fake engine. */
export const start = async (
  engine: Engine,
  handler: Handler,
  normalise: Normalise,
  operations: ReadonlyArray<string>,
  timing: Knobs = knobs()
): Promise<FakeServer> => {
  const spec = await validator(engine)
  spec.warm(operations)
  const requests: FakeServer["requests"] = []
  const violations: Array<string> = []
  let faults: Array<Fault> = []
  const hanging = new Set<http.ServerResponse>()
  const server = http.createServer((req, res) => {
    // A client that resets its connection (a timeout, a process stopping) must not crash the fake.
    req.on("error", () => undefined)
    res.on("error", () => undefined)
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1")
      const query: Record<string, string> = {}
      for (const [k, v] of url.searchParams) query[k] = v
      const headers: Record<string, string> = {}
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers[k] = v
      const text = Buffer.concat(chunks).toString("utf8")
      const contentType = (headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
      let body: unknown = text === "" ? undefined : text
      if (text !== "" && (contentType === "application/json" || contentType === "text/plain")) {
        try {
          body = JSON.parse(text)
        } catch {
          body = text
        }
      }
      const seen = normalise({ method: req.method ?? "GET", path: url.pathname, query, headers, body, contentType: text === "" ? "" : contentType })
      const verdict = spec.validate({ ...seen, path: url.pathname })
      requests.push({ ...seen, operationId: verdict.operationId })
      const send = (reply: Reply) => {
        const h: Record<string, string> = { ...reply.headers }
        let payload = ""
        if (reply.raw !== undefined) {
          payload = reply.raw
          h["content-type"] ??= "application/octet-stream"
        } else if (reply.body !== undefined) {
          payload = JSON.stringify(reply.body)
          h["content-type"] = "application/json"
        }
        res.writeHead(reply.status, h)
        res.end(payload)
      }
      if (verdict.errors.length > 0 || verdict.operationId === undefined) {
        const message = `${seen.method} ${url.pathname}: ${verdict.errors.join("; ")}`
        violations.push(message)
        return send({ status: 400, body: { message: `fake ${engine}: request violates the OpenAPI spec: ${message}` } })
      }
      const fault = faults.find((f) => (f.times ?? 1) > 0 && (f.match?.(seen) ?? true))
      if (fault) {
        fault.times = (fault.times ?? 1) - 1
        if (fault.kind === "hang") {
          hanging.add(res)
          return
        }
        if (fault.kind === "reset") {
          req.socket.destroy()
          return
        }
        return send({
          status: fault.status ?? 500,
          body: fault.body ?? { message: `injected ${fault.status ?? 500}` },
          headers: fault.retryAfterSeconds === undefined ? {} : { "retry-after": String(fault.retryAfterSeconds) }
        })
      }
      const crashed = (error: unknown) => send({ status: 500, body: { message: `fake ${engine} crashed: ${String(error)}` } })
      try {
        const reply = handler(seen, verdict.operationId)
        if (reply instanceof Promise) reply.then(send, crashed)
        else send(reply)
      } catch (error) {
        crashed(error)
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return {
    knobs: timing,
    port,
    url: `http://127.0.0.1:${port}`,
    requests,
    violations,
    inject: (fault) => {
      faults.push(fault)
    },
    clearFaults: () => {
      faults = []
    },
    close: async () => {
      for (const res of hanging) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

/** Splits a path into decoded segments. */
export const segments = (pathname: string): Array<string> => pathname.split("/").filter((s) => s !== "").map(decodeURIComponent)

// ---------------------------------------------------------------------------------------------
// Text

/** Lower-cased, diacritics folded. */
export const normalise = (s: string): string => s.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase()

/** The words of a text. */
export const words = (s: string): Array<string> => normalise(s).split(/[^\p{L}\p{N}]+/u).filter((w) => w !== "")

/** Edit distance; with `transpositions` a swap of two neighbours is one edit (optimal string alignment). */
export const distance = (a: string, b: string, transpositions: boolean): number => {
  const d: Array<Array<number>> = []
  for (let i = 0; i <= a.length; i++) d.push([i, ...Array<number>(b.length).fill(0)])
  for (let j = 0; j <= b.length; j++) d[0]![j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (transpositions && i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1)
      d[i]![j] = v
    }
  }
  return d[a.length]![b.length]!
}

/** One query term with its budget. */
export interface Term {
  readonly text: string
  readonly maxTypos: number
  readonly prefix: boolean
}

/** A matched document. */
export interface Match {
  readonly doc: Json
  readonly typos: number
  /** Field → matched (normalised) words. */
  readonly matched: Map<string, Set<string>>
}

/** Reads a dotted path (own properties only). */
export const read = (doc: unknown, path: string): unknown => {
  let value: unknown = doc
  for (const part of path.split(".")) {
    if (value === null || typeof value !== "object" || !Object.prototype.hasOwnProperty.call(value, part)) return undefined
    value = (value as Json)[part]
  }
  return value
}

/** The strings of a field value (a string or a list of strings). */
export const texts = (value: unknown): Array<string> =>
  typeof value === "string" ? [value] : Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : []

/** Matches every term (AND) in some of `fields`; undefined when a term matches nowhere. */
export const matchDoc = (doc: Json, terms: ReadonlyArray<Term>, fields: ReadonlyArray<string>, transpositions: boolean): Match | undefined => {
  const matched = new Map<string, Set<string>>()
  let typos = 0
  for (const term of terms) {
    let best = Infinity
    for (const field of fields) {
      for (const word of texts(read(doc, field)).flatMap(words)) {
        let d = distance(term.text, word, transpositions)
        if (term.prefix && word.startsWith(term.text)) d = 0
        if (d <= term.maxTypos) {
          best = Math.min(best, d)
          const set = matched.get(field) ?? new Set<string>()
          set.add(word)
          matched.set(field, set)
        }
      }
    }
    if (best === Infinity) return undefined
    typos += best
  }
  return { doc, typos, matched }
}

/** Wraps the matched words of `text` in the tags; the rest is left as is (engines do not escape). */
export const highlightText = (text: string, matched: ReadonlySet<string>, pre: string, post: string): string =>
  text.replace(/[\p{L}\p{N}\p{M}]+/gu, (w) => (matched.has(normalise(w)) ? `${pre}${w}${post}` : w))

/** The facet keys of a value: strings as is, numbers and booleans as their JSON text, list elements. */
export const facetKeys = (value: unknown): Array<string> => {
  const one = (v: unknown) => (typeof v === "string" ? [v] : typeof v === "number" || typeof v === "boolean" ? [JSON.stringify(v)] : [])
  return Array.isArray(value) ? value.flatMap(one) : one(value)
}

/** Counts facet values over the matched set. */
export const countFacets = (docs: ReadonlyArray<Json>, fields: ReadonlyArray<string>, max: number): Record<string, Record<string, number>> => {
  const out: Record<string, Record<string, number>> = {}
  for (const field of fields) {
    const counts = new Map<string, number>()
    for (const doc of docs) for (const key of new Set(facetKeys(read(doc, field)))) counts.set(key, (counts.get(key) ?? 0) + 1)
    out[field] = Object.fromEntries([...counts].sort((a, b) => b[1] - a[1]).slice(0, max))
  }
  return out
}

/** A tiny tokenizer for the engines' filter languages. */
export interface Token {
  readonly kind: "word" | "quoted" | "punct"
  readonly text: string
}

/** Scans `input`: quoted strings (`"…"` with backslash escapes), punctuation, words. */
export const scan = (input: string, puncts: ReadonlyArray<string>, quotes: string, escapes = true): Array<Token> => {
  const out: Array<Token> = []
  let i = 0
  const sortedPuncts = [...puncts].sort((a, b) => b.length - a.length)
  while (i < input.length) {
    const c = input[i]!
    if (/\s/.test(c)) {
      i++
      continue
    }
    if (quotes.includes(c)) {
      let j = i + 1
      let text = ""
      while (j < input.length && input[j] !== c) {
        if (escapes && input[j] === "\\" && j + 1 < input.length) {
          text += input[j + 1]
          j += 2
        } else text += input[j++]
      }
      if (j >= input.length) throw new FilterSyntaxError(`unterminated quote at ${i}`)
      out.push({ kind: "quoted", text })
      i = j + 1
      continue
    }
    const p = sortedPuncts.find((p) => input.startsWith(p, i))
    if (p) {
      out.push({ kind: "punct", text: p })
      i += p.length
      continue
    }
    let j = i
    while (j < input.length && !/\s/.test(input[j]!) && !quotes.includes(input[j]!) && !sortedPuncts.some((p) => input.startsWith(p, j))) j++
    out.push({ kind: "word", text: input.slice(i, j) })
    i = j
  }
  return out
}

/** A filter the fake cannot parse: the engine answers 400. */
export class FilterSyntaxError extends Error {}

/** A refusal with an HTTP status, thrown by handlers. */
export class HttpError extends Error {
  constructor(readonly status: number, readonly body: unknown) {
    super(JSON.stringify(body))
  }
}

/** Runs a handler body, turning `HttpError`/`FilterSyntaxError` into replies (also when it answers later). */
export const guard = (body: () => Reply | Promise<Reply>, bad: (message: string) => unknown): Reply | Promise<Reply> => {
  const refusal = (error: unknown): Reply => {
    if (error instanceof HttpError) return { status: error.status, body: error.body }
    if (error instanceof FilterSyntaxError) return { status: 400, body: bad(error.message) }
    throw error
  }
  try {
    const reply = body()
    return reply instanceof Promise ? reply.catch(refusal) : reply
  } catch (error) {
    return refusal(error)
  }
}
