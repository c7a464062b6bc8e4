/**
 * A fake Meilisearch (engineB) for the endpoints meilisearch-js 0.62 uses: indexes, settings,
 * documents (add = replace, delete-batch, list), search, swap-indexes, tasks. Writes are
 * asynchronous as in Meilisearch: a 202 with a `taskUid`; the outcome is read from `/tasks/{uid}`
 * (the first poll says `processing`, then the final status). Semantics from the Meilisearch
 * docs: document ids only `[A-Za-z0-9_-]` (else the task fails `invalid_document_id`); filters
 * and facets only on `filterableAttributes`, sort only on `sortableAttributes`; string `=` is
 * case-insensitive and `!=` matches documents without the field; typo tolerance is an index
 * setting (`minWordSizeForTypos` 5/9 by default, a swap of neighbours is one typo); a quoted
 * phrase is exact; the last unquoted word is a prefix. With `knobs` delays set, a document task
 * runs in the fake's queue and stays `processing` until it has.
 */
import type { FakeServer, Json, Reply, Term } from "./FakeCore.js"
import { countFacets, delayed, FilterSyntaxError, guard, highlightText, HttpError, knobs, matchDoc, normalise, read, scan, segments, start, taskQueue, texts, words } from "./FakeCore.js"
import type { SeenRequest } from "./SpecValidator.js"

interface Settings {
  searchableAttributes: Array<string>
  filterableAttributes: Array<string>
  sortableAttributes: Array<string>
  typoTolerance: { enabled: boolean; minWordSizeForTypos: { oneTypo: number; twoTypos: number } }
  faceting: { maxValuesPerFacet: number }
  pagination: { maxTotalHits: number }
}

interface Index {
  uid: string
  primaryKey: string | undefined
  settings: Settings
  docs: Map<string, Json>
}

interface Task {
  readonly taskUid: number
  readonly indexUid: string | null
  readonly type: string
  status: "enqueued" | "processing" | "succeeded" | "failed"
  error: Json | null
  polls: number
  /** False while the task waits in the queue (`knobs` delays). */
  done: boolean
}

/** The fake's state, exposed for tests. */
export interface MeilisearchFake extends FakeServer {
  readonly indexes: Map<string, Index>
  readonly tasks: Map<number, Task>
  /** Makes the next document tasks whose documents match fail with this error code. */
  failTasks: ((doc: Json) => string | undefined) | undefined
}

const defaults = (): Settings => ({
  searchableAttributes: ["*"],
  filterableAttributes: [],
  sortableAttributes: [],
  typoTolerance: { enabled: true, minWordSizeForTypos: { oneTypo: 5, twoTypos: 9 } },
  faceting: { maxValuesPerFacet: 100 },
  pagination: { maxTotalHits: 1000 }
})

const apiError = (status: number, code: string, message: string) =>
  new HttpError(status, { message, code, type: "invalid_request", link: `https://docs.meilisearch.com/errors#${code}` })

/** Starts a fake Meilisearch. */
export const startMeilisearch = async (): Promise<MeilisearchFake> => {
  const indexes = new Map<string, Index>()
  const tasks = new Map<number, Task>()
  const state: { fail: ((doc: Json) => string | undefined) | undefined } = { fail: undefined }
  const timing = knobs()
  const queue = taskQueue(timing)
  let nextTask = 0
  /** A task: its work runs now, or for a document task (`documents`) in the queue when delays are set. */
  const enqueue = (indexUid: string | null, type: string, work: () => Json | null, documents = false): Reply => {
    const task: Task = { taskUid: nextTask++, indexUid, type, status: "enqueued", error: null, polls: 0, done: false }
    const run = () => {
      task.error = work()
      task.done = true
    }
    if (documents && delayed(timing)) void queue(run)
    else run()
    tasks.set(task.taskUid, task)
    return { status: 202, body: { taskUid: task.taskUid, indexUid, status: "enqueued", type, enqueuedAt: new Date().toISOString() } }
  }
  const get = (uid: string) => {
    const index = indexes.get(uid)
    if (!index) throw apiError(404, "index_not_found", `Index \`${uid}\` not found.`)
    return index
  }
  const create = (uid: string, primaryKey?: string) => {
    const index: Index = { uid, primaryKey, settings: defaults(), docs: new Map() }
    indexes.set(uid, index)
    return index
  }
  const handler = (request: SeenRequest, operationId: string): Reply | Promise<Reply> =>
    guard(() => {
      const seg = segments(request.path)
      const body = request.body as Json
      switch (operationId) {
        case "create_index": {
          const uid = String(body["uid"])
          return enqueue(uid, "indexCreation", () => {
            if (indexes.has(uid)) return { code: "index_already_exists", message: `Index \`${uid}\` already exists.`, type: "invalid_request", link: "" }
            create(uid, body["primaryKey"] as string | undefined)
            return null
          })
        }
        case "get_index": {
          const index = get(seg[1]!)
          return { status: 200, body: { uid: index.uid, primaryKey: index.primaryKey ?? null, createdAt: new Date(0).toISOString(), updatedAt: new Date(0).toISOString() } }
        }
        case "delete_index":
          return enqueue(seg[1]!, "indexDeletion", () => {
            if (!indexes.delete(seg[1]!)) return { code: "index_not_found", message: `Index \`${seg[1]}\` not found.`, type: "invalid_request", link: "" }
            return null
          })
        case "update_all": {
          return enqueue(seg[1]!, "settingsUpdate", () => {
            const index = indexes.get(seg[1]!) ?? create(seg[1]!)
            const s = index.settings as unknown as Json
            for (const [k, v] of Object.entries(body)) {
              const current = s[k]
              s[k] = current && typeof current === "object" && !Array.isArray(current) && v && typeof v === "object" && !Array.isArray(v)
                ? { ...current as Json, ...v as Json }
                : v
            }
            return null
          })
        }
        case "replace_documents": {
          const uid = seg[1]!
          const docs = body as unknown as Array<Json>
          return enqueue(uid, "documentAdditionOrUpdate", () => {
            const index = indexes.get(uid) ?? create(uid, request.query["primaryKey"])
            if (request.query["primaryKey"] !== undefined) index.primaryKey ??= request.query["primaryKey"]
            const pk = index.primaryKey ?? "id"
            for (const doc of docs) {
              const id = doc[pk]
              if (typeof id !== "string" || !/^[A-Za-z0-9_-]{1,511}$/.test(id)) {
                return { code: "invalid_document_id", type: "invalid_request", link: "", message: `Document identifier \`${JSON.stringify(id)}\` is invalid. A document identifier can be of type integer or string, only composed of alphanumeric characters (a-z A-Z 0-9), hyphens (-) and underscores (_), and can not be more than 511 bytes.` }
              }
              const failure = state.fail?.(doc)
              if (failure) return { code: failure, type: "invalid_request", link: "", message: `injected: ${failure}` }
            }
            for (const doc of docs) index.docs.set(doc[pk] as string, doc)
            timing.onVisible?.(uid, docs)
            return null
          }, true)
        }
        case "delete_documents_batch": {
          const ids = body as unknown as Array<string>
          return enqueue(seg[1]!, "documentDeletion", () => {
            const index = indexes.get(seg[1]!)
            if (!index) return { code: "index_not_found", message: "not found", type: "invalid_request", link: "" }
            for (const id of ids) index.docs.delete(String(id))
            return null
          }, true)
        }
        case "get_documents": {
          const index = get(seg[1]!)
          const offset = Number(request.query["offset"] ?? 0)
          const limit = Number(request.query["limit"] ?? 20)
          const all = [...index.docs.values()]
          return { status: 200, body: { results: all.slice(offset, offset + limit), offset, limit, total: all.length } }
        }
        case "search_with_post":
          return { status: 200, body: search(get(seg[1]!), body) }
        case "swap_indexes": {
          const pairs = body as unknown as Array<{ indexes: [string, string] }>
          return enqueue(null, "indexSwap", () => {
            for (const { indexes: [a, b] } of pairs) {
              const x = indexes.get(a)
              const y = indexes.get(b)
              if (!x || !y) return { code: "index_not_found", message: `Indexes \`${x ? b : a}\` not found.`, type: "invalid_request", link: "" }
              indexes.set(a, { ...y, uid: a })
              indexes.set(b, { ...x, uid: b })
            }
            return null
          })
        }
        case "get_task": {
          const task = tasks.get(Number(seg[1]))
          if (!task) throw apiError(404, "task_not_found", `Task \`${seg[1]}\` not found.`)
          task.polls++
          task.status = task.polls === 1 || !task.done ? "processing" : task.error ? "failed" : "succeeded"
          return {
            status: 200,
            body: {
              uid: task.taskUid,
              batchUid: task.taskUid,
              indexUid: task.indexUid,
              status: task.status,
              type: task.type,
              canceledBy: null,
              details: {},
              error: task.status === "failed" ? task.error : null,
              duration: "PT0S",
              enqueuedAt: new Date(0).toISOString(),
              startedAt: new Date(0).toISOString(),
              finishedAt: task.status === "processing" ? null : new Date(0).toISOString()
            }
          }
        }
        default:
          throw new HttpError(501, { message: `fake meilisearch does not model ${operationId}` })
      }
    }, (message) => ({ message, code: "invalid_search_filter", type: "invalid_request", link: "" }))
  const server = await start("meilisearch", handler, (r) => r, OPERATIONS, timing)
  return Object.defineProperty(Object.assign(server, { indexes, tasks }), "failTasks", {
    get: () => state.fail,
    set: (f: ((doc: Json) => string | undefined) | undefined) => {
      state.fail = f
    }
  }) as MeilisearchFake
}

const search = (index: Index, body: Json): Json => {
  const s = index.settings
  const filterable = new Set(s.filterableAttributes)
  const filter = body["filter"]
  const preds = filter === undefined || filter === null ? [] : (Array.isArray(filter) ? filter : [filter]).map((f) => {
    if (Array.isArray(f)) {
      const ors = f.map((x) => parseFilter(String(x), filterable))
      return (d: Json) => ors.some((p) => p(d))
    }
    return parseFilter(String(f), filterable)
  })
  const facets = (body["facets"] as Array<string> | undefined) ?? []
  for (const f of facets) {
    if (!filterable.has(f)) throw apiError(400, "invalid_search_facets", `Invalid facet distribution: Attribute \`${f}\` is not filterable.`)
  }
  const sort = ((body["sort"] as Array<string> | undefined) ?? []).map((x) => {
    const [field, dir] = x.split(":")
    if (!s.sortableAttributes.includes(field!)) throw apiError(400, "invalid_search_sort", `Attribute \`${field}\` is not sortable.`)
    return { field: field!, desc: dir === "desc" }
  })
  const q = String(body["q"] ?? "")
  // Quoted phrases are exact; other words get the index's typo budget; the last free word is a prefix.
  const terms: Array<Term> = []
  const parts = q.split("\"")
  const free: Array<string> = []
  parts.forEach((part, i) => {
    if (i % 2 === 1) for (const w of words(part)) terms.push({ text: w, maxTypos: 0, prefix: false })
    else free.push(...words(part))
  })
  const typo = s.typoTolerance
  free.slice(0, 10).forEach((w, i) => {
    const budget = !typo.enabled ? 0 : w.length >= typo.minWordSizeForTypos.twoTypos ? 2 : w.length >= typo.minWordSizeForTypos.oneTypo ? 1 : 0
    terms.push({ text: w, maxTypos: budget, prefix: i === free.length - 1 })
  })
  const searchable = s.searchableAttributes.includes("*") ? undefined : s.searchableAttributes
  const matches = [...index.docs.values()].filter((d) => preds.every((p) => p(d))).flatMap((doc) => {
    const fields = searchable ?? Object.keys(doc).filter((k) => texts(doc[k]).length > 0)
    const m = matchDoc(doc, terms, fields, true)
    return m ? [m] : []
  })
  matches.sort((a, b) => {
    if (a.typos !== b.typos) return a.typos - b.typos
    for (const x of sort) {
      const [p, r] = [read(a.doc, x.field), read(b.doc, x.field)] as Array<string | number>
      const cmp = p! < r! ? -1 : p! > r! ? 1 : 0
      if (cmp !== 0) return x.desc ? -cmp : cmp
    }
    return 0
  })
  const capped = matches.slice(0, s.pagination.maxTotalHits)
  const offset = Number(body["offset"] ?? 0)
  const limit = Number(body["limit"] ?? 20)
  const toHighlight = (body["attributesToHighlight"] as Array<string> | undefined) ?? []
  const pre = String(body["highlightPreTag"] ?? "<em>")
  const post = String(body["highlightPostTag"] ?? "</em>")
  const hits = capped.slice(offset, offset + limit).map((m) => {
    if (toHighlight.length === 0) return m.doc
    const formatted: Json = {}
    for (const [k, v] of Object.entries(m.doc)) {
      const set = m.matched.get(k)
      const wanted = toHighlight.includes("*") || toHighlight.includes(k)
      formatted[k] = !wanted || !set ? v
        : Array.isArray(v) ? v.map((x) => (typeof x === "string" ? highlightText(x, set, pre, post) : x))
        : typeof v === "string" ? highlightText(v, set, pre, post) : v
    }
    return { ...m.doc, _formatted: formatted }
  })
  const counts = countFacets(capped.map((m) => m.doc), facets, s.faceting.maxValuesPerFacet)
  return {
    hits,
    query: q,
    processingTimeMs: 0,
    limit,
    offset,
    estimatedTotalHits: capped.length,
    ...(facets.length > 0 ? { facetDistribution: counts, facetStats: {} } : {})
  }
}

/** The operations this fake models (their validators are compiled at start). */
const OPERATIONS = ["create_index", "get_index", "delete_index", "update_all", "replace_documents", "delete_documents_batch", "get_documents", "search_with_post", "swap_indexes", "get_task"]

type Pred = (doc: Json) => boolean
const KEYWORDS = new Set(["AND", "OR", "NOT", "IN", "TO", "EXISTS", "IS", "NULL", "EMPTY"])

/** Parses one Meilisearch filter expression. `AND` binds tighter than `OR`. */
const parseFilter = (input: string, filterable: ReadonlySet<string>): Pred => {
  const tokens = scan(input, ["(", ")", "[", "]", ",", "!=", ">=", "<=", "=", ">", "<"], "\"'")
  let i = 0
  const peek = () => tokens[i]
  const isWord = (w: string) => peek()?.kind === "word" && peek()!.text.toUpperCase() === w
  const isPunct = (p: string) => peek()?.kind === "punct" && peek()!.text === p
  const take = () => {
    const t = tokens[i++]
    if (!t) throw new FilterSyntaxError("Was expecting a value but instead got nothing.")
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
      const inner = not()
      return (d) => !inner(d)
    }
    return primary()
  }
  const value = (): string => {
    const t = take()
    if (t.kind === "quoted") return t.text
    if (t.kind === "word" && !KEYWORDS.has(t.text.toUpperCase())) return t.text
    throw new FilterSyntaxError(`Was expecting a value but instead got \`${t.text}\`.`)
  }
  const list = (): Array<string> => {
    if (!isPunct("[")) throw new FilterSyntaxError("Expected `[` after `IN` keyword.")
    i++
    const out = [value()]
    while (isPunct(",")) {
      i++
      out.push(value())
    }
    if (!isPunct("]")) throw new FilterSyntaxError("Expected matching `]` after the list of values.")
    i++
    return out
  }
  const primary = (): Pred => {
    if (isPunct("(")) {
      i++
      const inner = or()
      if (!isPunct(")")) throw new FilterSyntaxError("Expression `(` is missing a closing `)`.")
      i++
      return inner
    }
    const attr = value()
    if (!filterable.has(attr)) throw new FilterSyntaxError(`Attribute \`${attr}\` is not filterable.`)
    const get = (d: Json) => read(d, attr)
    if (isWord("IN")) {
      i++
      const vs = list()
      return (d) => vs.some((v) => eq(get(d), v))
    }
    if (isWord("NOT")) {
      i++
      if (!isWord("IN")) throw new FilterSyntaxError("Expected `IN` after `NOT`.")
      i++
      const vs = list()
      return (d) => !vs.some((v) => eq(get(d), v))
    }
    if (isWord("EXISTS")) {
      i++
      return (d) => get(d) !== undefined
    }
    const op = take()
    if (op.kind !== "punct") {
      if (op.kind === "word") {
        // `attr lo TO hi`
        const lo = Number(op.text)
        if (!isWord("TO")) throw new FilterSyntaxError(`Was expecting an operation but got \`${op.text}\`.`)
        i++
        const hi = Number(value())
        return (d) => numbers(get(d)).some((n) => n >= lo && n <= hi)
      }
      throw new FilterSyntaxError(`Was expecting an operation but got \`${op.text}\`.`)
    }
    const v = value()
    switch (op.text) {
      case "=":
        return (d) => eq(get(d), v)
      case "!=":
        return (d) => !eq(get(d), v)
      default: {
        const n = Number(v)
        if (Number.isNaN(n)) throw new FilterSyntaxError(`fake: ordered comparison with a non-number \`${v}\` is not modelled`)
        const cmp = op.text === ">" ? (x: number) => x > n : op.text === ">=" ? (x: number) => x >= n : op.text === "<" ? (x: number) => x < n : (x: number) => x <= n
        return (d) => numbers(get(d)).some(cmp)
      }
    }
  }
  const pred = or()
  if (i !== tokens.length) throw new FilterSyntaxError(`Found unexpected characters at the end of the filter: \`${tokens[i]!.text}\`.`)
  return pred
}

const numbers = (v: unknown): Array<number> => (Array.isArray(v) ? v : [v]).filter((x): x is number => typeof x === "number")

/** Meilisearch equality: numbers numerically, strings case-insensitively, any element of a list. */
const eq = (value: unknown, literal: string): boolean =>
  (Array.isArray(value) ? value : [value]).some((x) =>
    typeof x === "number" ? x === Number(literal) && literal.trim() !== ""
      : typeof x === "boolean" ? String(x) === literal.toLowerCase()
      : typeof x === "string" ? normalise(x) === normalise(literal) : false
  )
