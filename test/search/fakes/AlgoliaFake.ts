/**
 * A fake Algolia Search API (engineC) for the endpoints algoliasearch v5 uses: batch, settings,
 * task, query, browse, operation (move), delete index. Writes answer a `taskID`; the task is
 * `notPublished` on the first poll, then `published` (or never, when told to stall). Semantics
 * from the Algolia docs: facet filters `attr:"v"` only on `attributesForFaceting` (a filter on
 * another attribute matches nothing) and compare values case-insensitively; numeric filters
 * `attr op n`; `NOT` negates (so it matches a record without the attribute); typo tolerance
 * `true|false|min|strict` with `minWordSizefor1Typo` (4) / `minWordSizefor2Typos` (8), a swap of
 * neighbours is one typo; `queryType` prefixLast (default) or prefixNone; ties by `customRanking`.
 * With `knobs` delays set, a batch's records are applied (searchable) only when its task is run
 * and published (`publishDelayMs`: Algolia's replication before a task is `published`); its task
 * stays `notPublished` until then. Settings, moves and deletes are not delayed.
 */
import type { FakeServer, Json, Reply, Term } from "./FakeCore.js"
import { countFacets, delayed, FilterSyntaxError, guard, highlightText, HttpError, knobs, matchDoc, normalise, read, scan, segments, start, taskQueue, texts, words } from "./FakeCore.js"
import type { SeenRequest } from "./SpecValidator.js"

interface Index {
  settings: Json
  objects: Map<string, Json>
}

/** The fake's state, exposed for tests. */
export interface AlgoliaFake extends FakeServer {
  readonly indexes: Map<string, Index>
  /** When true, tasks stay `notPublished`. */
  stallTasks: boolean
}

/** algoliasearch deviations from the spec, allowed exactly (notes §1.6). */
const normaliseRequest = (request: SeenRequest): SeenRequest => {
  // algoliasearch sends JSON bodies as text/plain (browser "simple" requests) and adds
  // `x-algolia-agent` to every query string.
  const { "x-algolia-agent": _, ...query } = request.query
  return { ...request, query, contentType: request.contentType === "text/plain" ? "application/json" : request.contentType }
}

const error = (status: number, message: string) => new HttpError(status, { message, status })

/** Starts a fake Algolia. */
export const startAlgolia = async (): Promise<AlgoliaFake> => {
  const indexes = new Map<string, Index>()
  const state = { stall: false }
  const pending = new Map<number, number>()
  /** Tasks still waiting in the queue (`knobs` delays). */
  const queued = new Set<number>()
  const timing = knobs()
  const queue = taskQueue(timing)
  let nextTask = 1
  /** A task; `apply` (a batch's records) runs now, or in the queue when delays are set. */
  const task = (extra: Json, apply?: () => void): Reply => {
    const taskID = nextTask++
    pending.set(taskID, 0)
    if (apply !== undefined && delayed(timing)) {
      queued.add(taskID)
      void queue(() => {
        apply()
        queued.delete(taskID)
      })
    } else apply?.()
    return { status: 200, body: { taskID, updatedAt: new Date().toISOString(), ...extra } }
  }
  const ensure = (name: string) => {
    let index = indexes.get(name)
    if (!index) {
      index = { settings: {}, objects: new Map() }
      indexes.set(name, index)
    }
    return index
  }
  const handler = (request: SeenRequest, operationId: string): Reply | Promise<Reply> =>
    guard(() => {
      const seg = segments(request.path)
      const name = seg[2]!
      const body = (request.body ?? {}) as Json
      switch (operationId) {
        case "batch": {
          const index = ensure(name)
          const requests = body["requests"] as Array<{ action: string; body: Json }>
          for (const r of requests) {
            if (r.action !== "updateObject" && r.action !== "addObject" && r.action !== "deleteObject") throw error(400, `fake: action ${r.action} is not modelled`)
          }
          const objectIDs = requests.map((r) => String(r.body["objectID"]))
          return task({ objectIDs }, () => {
            const visible: Array<Json> = []
            for (const r of requests) {
              const id = String(r.body["objectID"])
              if (r.action === "deleteObject") index.objects.delete(id)
              else {
                index.objects.set(id, r.body)
                visible.push(r.body)
              }
            }
            if (visible.length > 0) timing.onVisible?.(name, visible)
          })
        }
        case "setSettings":
          ensure(name).settings = { ...ensure(name).settings, ...body }
          return task({})
        case "getSettings": {
          const index = indexes.get(name)
          if (!index) throw error(404, "Index does not exist")
          return { status: 200, body: index.settings }
        }
        case "getTask": {
          const id = Number(seg[4])
          const polls = pending.get(id)
          if (polls === undefined) throw error(404, "Task does not exist")
          pending.set(id, polls + 1)
          return { status: 200, body: { status: state.stall || polls === 0 || queued.has(id) ? "notPublished" : "published" } }
        }
        case "searchSingleIndex": {
          const index = indexes.get(name)
          if (!index) throw error(404, "Index does not exist")
          return { status: 200, body: search(index, body) }
        }
        case "browse": {
          const index = indexes.get(name)
          if (!index) throw error(404, "Index does not exist")
          const start = body["cursor"] === undefined ? 0 : Number(body["cursor"])
          const size = Number(body["hitsPerPage"] ?? 1000)
          const all = [...index.objects.values()]
          const hits = all.slice(start, start + size)
          return { status: 200, body: { hits, nbHits: all.length, page: 0, nbPages: 1, hitsPerPage: size, processingTimeMS: 0, query: "", params: "", ...(start + size < all.length ? { cursor: String(start + size) } : {}) } }
        }
        case "operationIndex": {
          const source = indexes.get(name)
          if (!source) throw error(404, "Index does not exist")
          if (body["operation"] !== "move") throw error(400, "fake: only move is modelled")
          indexes.set(String(body["destination"]), source)
          indexes.delete(name)
          return task({})
        }
        case "deleteIndex":
          indexes.delete(name)
          return task({ deletedAt: new Date().toISOString() })
        default:
          throw error(501, `fake algolia does not model ${operationId}`)
      }
    }, (message) => ({ message, status: 400 }))
  const server = await start("algolia", handler, normaliseRequest, OPERATIONS, timing)
  return Object.defineProperty(Object.assign(server, { indexes }), "stallTasks", {
    get: () => state.stall,
    set: (v: boolean) => {
      state.stall = v
    }
  }) as AlgoliaFake
}

const facetable = (settings: Json): Set<string> =>
  new Set(((settings["attributesForFaceting"] as Array<string> | undefined) ?? []).map((a) => a.replace(/^(filterOnly|searchable|afterDistinct)\((.*)\)$/, "$2")))

const search = (index: Index, body: Json): Json => {
  const settings = index.settings
  const facetAttrs = facetable(settings)
  const pred = typeof body["filters"] === "string" && body["filters"] !== "" ? parseFilter(body["filters"], facetAttrs) : () => true
  const tolerance = body["typoTolerance"] ?? settings["typoTolerance"] ?? true
  const min1 = Number(body["minWordSizefor1Typo"] ?? settings["minWordSizefor1Typo"] ?? 4)
  const min2 = Number(body["minWordSizefor2Typos"] ?? settings["minWordSizefor2Typos"] ?? 8)
  const prefixLast = (body["queryType"] ?? settings["queryType"] ?? "prefixLast") === "prefixLast"
  const qWords = words(String(body["query"] ?? ""))
  const terms: Array<Term> = qWords.map((w, i) => ({
    text: w,
    maxTypos: tolerance === false || tolerance === "false" ? 0 : w.length >= min2 ? 2 : w.length >= min1 ? 1 : 0,
    prefix: prefixLast && i === qWords.length - 1
  }))
  const searchable = ((settings["searchableAttributes"] as Array<string> | undefined) ?? []).map((a) => a.replace(/^unordered\((.*)\)$/, "$1"))
  let matches = [...index.objects.values()].filter(pred).flatMap((doc) => {
    const fields = searchable.length > 0 ? searchable : Object.keys(doc).filter((k) => k !== "objectID" && texts(doc[k]).length > 0)
    const m = matchDoc(doc, terms, fields, true)
    return m ? [m] : []
  })
  if (tolerance === "min" && matches.length > 0) {
    const least = Math.min(...matches.map((m) => m.typos))
    matches = matches.filter((m) => m.typos === least)
  }
  const custom = ((settings["customRanking"] as Array<string> | undefined) ?? []).map((r) => {
    const m = /^(asc|desc)\((.*)\)$/.exec(r)
    return { field: m![2]!, desc: m![1] === "desc" }
  })
  matches.sort((a, b) => {
    if (a.typos !== b.typos) return a.typos - b.typos
    for (const c of custom) {
      const [p, r] = [read(a.doc, c.field), read(b.doc, c.field)] as Array<string | number>
      const cmp = p! < r! ? -1 : p! > r! ? 1 : 0
      if (cmp !== 0) return c.desc ? -cmp : cmp
    }
    return 0
  })
  const capped = matches.slice(0, Number(settings["paginationLimitedTo"] ?? 1000))
  const offset = body["offset"] !== undefined ? Number(body["offset"]) : Number(body["page"] ?? 0) * Number(body["hitsPerPage"] ?? 20)
  const length = body["length"] !== undefined ? Number(body["length"]) : Number(body["hitsPerPage"] ?? 20)
  const pre = String(body["highlightPreTag"] ?? "<em>")
  const post = String(body["highlightPostTag"] ?? "</em>")
  const toHighlight = (body["attributesToHighlight"] as Array<string> | undefined) ?? []
  const hits = capped.slice(offset, offset + length).map((m) => {
    const hl: Json = {}
    for (const field of toHighlight) {
      const v = read(m.doc, field)
      const set = m.matched.get(field) ?? new Set<string>()
      const one = (text: string) => {
        const hit = words(text).filter((w) => set.has(w))
        return { value: highlightText(text, set, pre, post), matchLevel: hit.length === 0 ? "none" : "full", matchedWords: hit, fullyHighlighted: false }
      }
      if (Array.isArray(v)) hl[field] = texts(v).map(one)
      else if (typeof v === "string") hl[field] = one(v)
    }
    return { ...m.doc, ...(toHighlight.length > 0 ? { _highlightResult: hl } : {}) }
  })
  const facets = (body["facets"] as Array<string> | undefined) ?? []
  const counted = countFacets(capped.map((m) => m.doc), facets.filter((f) => facetAttrs.has(f)), Number(body["maxValuesPerFacet"] ?? 100))
  return {
    hits,
    nbHits: capped.length,
    page: 0,
    nbPages: 1,
    hitsPerPage: length,
    processingTimeMS: 0,
    query: String(body["query"] ?? ""),
    params: "",
    exhaustiveNbHits: true,
    ...(facets.length > 0 ? { facets: counted, exhaustiveFacetsCount: true } : {})
  }
}

/** The operations this fake models (their validators are compiled at start). */
const OPERATIONS = ["batch", "setSettings", "getSettings", "getTask", "searchSingleIndex", "browse", "operationIndex", "deleteIndex"]

type Pred = (doc: Json) => boolean

/** Parses Algolia `filters`. */
const parseFilter = (input: string, facetAttrs: ReadonlySet<string>): Pred => {
  const tokens = scan(input, ["(", ")", ":", "!=", ">=", "<=", "=", ">", "<"], "\"")
  let i = 0
  const peek = () => tokens[i]
  const isWord = (w: string) => peek()?.kind === "word" && peek()!.text === w
  const isPunct = (p: string) => peek()?.kind === "punct" && peek()!.text === p
  const take = () => {
    const t = tokens[i++]
    if (!t) throw new FilterSyntaxError("filters: Unexpected end of input")
    return t
  }
  const or = (): Pred => {
    let left = and()
    while (isWord("OR")) {
      i++
      const [l, r] = [left, and()]
      left = (d) => l(d) || r(d)
    }
    return left
  }
  const and = (): Pred => {
    let left = not()
    while (isWord("AND")) {
      i++
      const [l, r] = [left, not()]
      left = (d) => l(d) && r(d)
    }
    return left
  }
  const not = (): Pred => {
    if (isWord("NOT")) {
      i++
      const inner = primary()
      return (d) => !inner(d)
    }
    return primary()
  }
  const primary = (): Pred => {
    if (isPunct("(")) {
      i++
      const inner = or()
      if (!isPunct(")")) throw new FilterSyntaxError("filters: Unexpected token, expected ')'")
      i++
      return inner
    }
    const attrTok = take()
    if (attrTok.kind === "punct") throw new FilterSyntaxError(`filters: Unexpected token ${attrTok.text}`)
    const attr = attrTok.text
    const op = take()
    if (op.kind !== "punct") throw new FilterSyntaxError(`filters: Unexpected token ${op.text} expected ':' or an operator`)
    const v = take()
    if (v.kind === "punct") throw new FilterSyntaxError(`filters: Unexpected token ${v.text}`)
    if (op.text === ":") {
      if (isWord("TO")) {
        i++
        const hi = Number(take().text)
        const lo = Number(v.text)
        return (d) => nums(read(d, attr)).some((n) => n >= lo && n <= hi)
      }
      if (!facetAttrs.has(attr)) return () => false
      return (d) => (Array.isArray(read(d, attr)) ? read(d, attr) as Array<unknown> : [read(d, attr)]).some((x) =>
        (typeof x === "string" || typeof x === "number" || typeof x === "boolean") && normalise(String(x)) === normalise(v.text)
      )
    }
    const n = Number(v.text)
    if (v.kind !== "word" || Number.isNaN(n)) throw new FilterSyntaxError(`filters: Invalid numeric value ${v.text}`)
    const cmp = op.text === "=" ? (x: number) => x === n : op.text === "!=" ? (x: number) => x !== n
      : op.text === ">" ? (x: number) => x > n : op.text === ">=" ? (x: number) => x >= n
      : op.text === "<" ? (x: number) => x < n : (x: number) => x <= n
    return (d) => nums(read(d, attr)).some(cmp)
  }
  const pred = or()
  if (i !== tokens.length) throw new FilterSyntaxError(`filters: Unexpected token ${tokens[i]!.text}`)
  return pred
}

const nums = (v: unknown): Array<number> => (Array.isArray(v) ? v : [v]).filter((x): x is number => typeof x === "number")
