/**
 * A fake Typesense (engineA) for the endpoints typesense-js 3.1 uses: collections, aliases,
 * JSONL import, single delete, export, search. Semantics modelled on the Typesense docs:
 * `query_by` is mandatory; `filter_by` with `:=`, `:!=`, `:>`…, lists `[…]`, backtick-quoted
 * strings (no escape for a backtick, as in Typesense); filter and facet fields must be in the
 * schema (facets need `facet: true`); typo budget `num_typos` gated by `min_len_1typo` /
 * `min_len_2typo`, typos tried only below `typo_tokens_threshold` exact results, words dropped
 * from the right below `drop_tokens_threshold` results (the defaults are Typesense's), prefix
 * on unless `prefix=false`, a swap of neighbours is one typo. Decisions where the docs are silent: string `:=` is case-sensitive,
 * `:!=` matches a document without the field. With `knobs` delays set, an import or a delete
 * answers once its task has run (Typesense answers a write when it is applied).
 */
import type { FakeServer, Json, Match, Reply, Term } from "./FakeCore.js"
import { countFacets, delayed, facetKeys, FilterSyntaxError, guard, highlightText, HttpError, knobs, matchDoc, read, scan, segments, start, taskQueue, texts, words } from "./FakeCore.js"
import type { SeenRequest } from "./SpecValidator.js"

interface Field {
  readonly name: string
  readonly type: string
  readonly facet?: boolean
  readonly optional?: boolean
  readonly sort?: boolean
  readonly index?: boolean
}

interface Collection {
  readonly name: string
  readonly fields: Array<Field>
  readonly docs: Map<string, Json>
}

/** The operations this fake models (their validators are compiled at start). */
const OPERATIONS = ["createCollection", "getCollection", "deleteCollection", "upsertAlias", "getAlias", "importDocuments", "deleteDocument", "deleteDocuments", "exportDocuments", "searchCollection"]

type Pred = (doc: Json) => boolean

/** The fake's state, exposed for tests. */
export interface TypesenseFake extends FakeServer {
  readonly collections: Map<string, Collection>
  readonly aliases: Map<string, string>
  /** Makes import lines of documents matching `reject` fail (`success: false`). */
  rejectDocuments: ((doc: Json) => string | undefined) | undefined
}

const notFound = (message: string) => new HttpError(404, { message })

/** typesense-js deviations from the spec, allowed exactly (notes §1.6). */
const normaliseRequest = (request: SeenRequest): SeenRequest => {
  if (request.method === "POST" && /\/documents\/import$/.test(request.path)) {
    // typesense-js sends the JSONL import as text/plain (the spec declares application/octet-stream)
    // and leaks its own `throwOnFail` option into the query string.
    const { throwOnFail: _, ...query } = request.query
    const body = typeof request.body === "string" ? request.body : JSON.stringify(request.body)
    return { ...request, query, body, contentType: request.contentType === "text/plain" ? "application/octet-stream" : request.contentType }
  }
  return request
}

/** Starts a fake Typesense. */
export const startTypesense = async (): Promise<TypesenseFake> => {
  const collections = new Map<string, Collection>()
  const aliases = new Map<string, string>()
  const state: { reject: ((doc: Json) => string | undefined) | undefined } = { reject: undefined }
  const timing = knobs()
  const queue = taskQueue(timing)
  /** Runs a document write now, or as a task of the queue when delays are set. */
  const write = (apply: () => Reply): Reply | Promise<Reply> => (delayed(timing) ? queue(apply) : apply())
  const resolve = (name: string) => {
    const c = collections.get(aliases.get(name) ?? name)
    if (!c) throw notFound(`Collection not found`)
    return c
  }
  const handler = (request: SeenRequest, operationId: string): Reply | Promise<Reply> =>
    guard(() => {
      const seg = segments(request.path)
      const body = request.body as Json
      switch (operationId) {
        case "createCollection": {
          const name = String(body["name"])
          if (collections.has(name)) throw new HttpError(409, { message: `A collection with name \`${name}\` already exists.` })
          const fields = (body["fields"] as Array<Field>).map((f) => ({ ...f }))
          collections.set(name, { name, fields, docs: new Map() })
          return { status: 201, body: { ...body, num_documents: 0, created_at: 0 } }
        }
        case "getCollection": {
          const c = resolve(seg[1]!)
          return { status: 200, body: { name: c.name, fields: c.fields, num_documents: c.docs.size } }
        }
        case "deleteCollection": {
          const c = collections.get(seg[1]!)
          if (!c) throw notFound("Collection not found")
          collections.delete(c.name)
          return { status: 200, body: { name: c.name, fields: c.fields } }
        }
        case "upsertAlias": {
          const target = String(body["collection_name"])
          aliases.set(seg[1]!, target)
          return { status: 200, body: { name: seg[1], collection_name: target } }
        }
        case "getAlias": {
          const target = aliases.get(seg[1]!)
          if (target === undefined) throw notFound("Not found.")
          return { status: 200, body: { name: seg[1], collection_name: target } }
        }
        case "importDocuments": {
          resolve(seg[1]!)
          if (request.query["action"] !== "upsert") throw new HttpError(400, { message: "fake: only action=upsert is modelled" })
          const lines = String(request.body ?? "").split("\n").filter((l) => l.trim() !== "")
          return write(() => {
            const c = resolve(seg[1]!)
            const visible: Array<Json> = []
            const out = lines.map((line) => {
              let doc: Json
              try {
                doc = JSON.parse(line) as Json
              } catch {
                return { success: false, error: "Bad JSON.", document: line }
              }
              const problem = typeof doc["id"] !== "string" ? "Document's `id` field should be a string." : checkTypes(c, doc) ?? state.reject?.(doc)
              if (problem) return { success: false, error: problem, document: line }
              c.docs.set(doc["id"] as string, doc)
              visible.push(doc)
              return { success: true }
            })
            if (visible.length > 0) timing.onVisible?.(c.name, visible)
            return { status: 200, raw: out.map((o) => JSON.stringify(o)).join("\n") }
          })
        }
        case "deleteDocument": {
          const c = resolve(seg[1]!)
          const doc = c.docs.get(seg[3]!)
          if (!doc) throw notFound(`Could not find a document with id: ${seg[3]}`)
          c.docs.delete(seg[3]!)
          return { status: 200, body: doc }
        }
        case "deleteDocuments": {
          // Only the filter the backend sends is modelled: `id:[`a`,`b`,…]` (backtick-quoted ids).
          resolve(seg[1]!)
          const filter = String(request.query["filter_by"] ?? "")
          const list = /^id:\[(.*)\]$/.exec(filter)
          if (!list) throw new HttpError(400, { message: `fake: only filter_by=id:[…] is modelled for deletes, got \`${filter}\`` })
          const ids = list[1]!.match(/`[^`]*`/g)?.map((quoted) => quoted.slice(1, -1)) ?? []
          return write(() => {
            const c = resolve(seg[1]!)
            let deleted = 0
            for (const id of ids) if (c.docs.delete(id)) deleted++
            return { status: 200, body: { num_deleted: deleted } }
          })
        }
        case "exportDocuments": {
          const c = resolve(seg[1]!)
          return { status: 200, raw: [...c.docs.values()].map((d) => JSON.stringify(d)).join("\n") }
        }
        case "searchCollection":
          return search(resolve(seg[1]!), request.query)
        default:
          throw new HttpError(501, { message: `fake typesense does not model ${operationId}` })
      }
    }, (message) => ({ message }))
  const server = await start("typesense", handler, normaliseRequest, OPERATIONS, timing)
  return Object.defineProperty(Object.assign(server, { collections, aliases }), "rejectDocuments", {
    get: () => state.reject,
    set: (f: ((doc: Json) => string | undefined) | undefined) => {
      state.reject = f
    }
  }) as TypesenseFake
}

const checkTypes = (c: Collection, doc: Json): string | undefined => {
  for (const f of c.fields) {
    const v = read(doc, f.name)
    if (v === undefined || v === null) {
      if (!f.optional) return `Field \`${f.name}\` has been declared in the schema, but is not found in the document.`
      continue
    }
    const ok = f.type === "string" ? typeof v === "string"
      : f.type === "string[]" ? Array.isArray(v) && v.every((x) => typeof x === "string")
      : f.type === "float" ? typeof v === "number"
      : f.type === "int64" || f.type === "int32" ? Number.isInteger(v)
      : f.type === "bool" ? typeof v === "boolean"
      : true
    if (!ok) return `Field \`${f.name}\` must be ${f.type === "float" ? "a float" : f.type === "bool" ? "a bool" : `a ${f.type}`}.`
  }
  return undefined
}

const intParam = (query: Readonly<Record<string, string>>, name: string, fallback: number) => {
  const v = query[name]
  return v === undefined ? fallback : Number(v)
}

const search = (c: Collection, query: Readonly<Record<string, string>>): Reply => {
  if (query["query_by"] === undefined) throw new HttpError(400, { message: "Parameter `query_by` is required." })
  const queryBy = query["query_by"].split(",").map((s) => s.trim())
  for (const f of queryBy) {
    const field = c.fields.find((x) => x.name === f)
    if (!field) throw notFound(`Could not find a field named \`${f}\` in the schema.`)
    if (field.type !== "string" && field.type !== "string[]") throw new HttpError(400, { message: `Field \`${f}\` should be a string or a string array.` })
  }
  const pred = query["filter_by"] ? parseFilter(c, query["filter_by"]) : () => true
  const q = query["q"] ?? ""
  const numTypos = intParam(query, "num_typos", 2)
  const min1 = intParam(query, "min_len_1typo", 4)
  const min2 = intParam(query, "min_len_2typo", 7)
  const prefix = query["prefix"] !== "false"
  const typoThreshold = intParam(query, "typo_tokens_threshold", 1)
  const dropThreshold = intParam(query, "drop_tokens_threshold", 1)
  const candidates = [...c.docs.values()].filter(pred)
  let qWords = q === "*" ? [] : words(q)
  const run = (typos: boolean): Array<Match> => {
    const terms: Array<Term> = qWords.map((w, i) => ({
      text: w,
      maxTypos: !typos ? 0 : Math.min(numTypos, w.length >= min2 ? 2 : w.length >= min1 ? 1 : 0),
      prefix: prefix && i === qWords.length - 1
    }))
    return candidates.flatMap((doc) => {
      const m = matchDoc(doc, terms, queryBy, true)
      return m ? [m] : []
    })
  }
  let matches = run(false)
  if (matches.length < typoThreshold) matches = run(true)
  while (matches.length < dropThreshold && qWords.length > 1) {
    qWords = qWords.slice(0, -1)
    matches = run(true)
  }
  const sortBy = (query["sort_by"] ?? "_text_match:desc").split(",").map((s) => {
    const [field, dir] = s.trim().split(":")
    if (field !== "_text_match" && !c.fields.some((f) => f.name === field && (f.sort === true || f.type !== "string"))) {
      throw new HttpError(404, { message: `Could not find a field named \`${field}\` in the schema for sorting.` })
    }
    return { field: field!, desc: dir === "desc" }
  })
  matches.sort((a, b) => {
    for (const s of sortBy) {
      const [x, y] = s.field === "_text_match" ? [-a.typos, -b.typos] : [read(a.doc, s.field), read(b.doc, s.field)]
      const cmp = (x as number | string) < (y as number | string) ? -1 : (x as number | string) > (y as number | string) ? 1 : 0
      if (cmp !== 0) return s.desc ? -cmp : cmp
    }
    return 0
  })
  const facetBy = query["facet_by"] ? query["facet_by"].split(",").map((s) => s.trim()) : []
  for (const f of facetBy) {
    if (!c.fields.some((x) => x.name === f && x.facet === true)) throw notFound(`Could not find a facet field named \`${f}\` in the schema.`)
  }
  const maxFacet = intParam(query, "max_facet_values", 10)
  const facets = countFacets(matches.map((m) => m.doc), facetBy, maxFacet)
  const perPage = intParam(query, "limit", intParam(query, "per_page", 10))
  if (perPage > 250) throw new HttpError(422, { message: "Only upto 250 hits can be fetched per page." })
  const offset = query["offset"] !== undefined ? Number(query["offset"]) : (intParam(query, "page", 1) - 1) * perPage
  const highlightFields = query["highlight_fields"] ? query["highlight_fields"].split(",") : queryBy
  const full = new Set(query["highlight_full_fields"] ? query["highlight_full_fields"].split(",") : [])
  const pre = query["highlight_start_tag"] ?? "<mark>"
  const post = query["highlight_end_tag"] ?? "</mark>"
  const hits = matches.slice(offset, offset + perPage).map((m) => ({
    document: m.doc,
    text_match: 1000 - m.typos,
    highlights: highlightFields.flatMap((field): Array<Json> => {
      const set = m.matched.get(field)
      if (!set) return []
      const value = read(m.doc, field)
      if (Array.isArray(value)) {
        const ts = texts(value)
        const indices = ts.flatMap((t, i) => (words(t).some((w) => set.has(w)) ? [i] : []))
        return [{ field, indices, snippets: indices.map((i) => highlightText(ts[i]!, set, pre, post)), matched_tokens: [...set].map((w) => [w]) }]
      }
      const h = highlightText(String(value), set, pre, post)
      return [{ field, snippet: h, ...(full.has(field) ? { value: h } : {}), matched_tokens: [...set] }]
    })
  }))
  return {
    status: 200,
    body: {
      found: matches.length,
      out_of: c.docs.size,
      page: Math.floor(offset / Math.max(perPage, 1)) + 1,
      search_time_ms: 0,
      hits,
      facet_counts: facetBy.map((f) => ({
        field_name: f,
        counts: Object.entries(facets[f]!).map(([value, count]) => ({ value, count, highlighted: value })),
        stats: {}
      })),
      request_params: { collection_name: c.name, q, per_page: perPage }
    }
  }
}

/** Parses `filter_by` into a predicate; `||` binds looser than `&&`. */
const parseFilter = (c: Collection, input: string): Pred => {
  // Typesense first balances parentheses and splits on && / || honouring backtick quoting without
  // escapes; a backtick inside a value cannot be written (typesense/typesense#196).
  const tokens = scan(input, ["&&", "||", "(", ")", "[", "]", ",", ":"], "`", false)
  let i = 0
  const peek = () => tokens[i]
  const take = () => {
    const t = tokens[i++]
    if (!t) throw new FilterSyntaxError("Could not parse the filter query: unexpected end.")
    return t
  }
  const expectPunct = (p: string) => {
    const t = take()
    if (t.kind !== "punct" || t.text !== p) throw new FilterSyntaxError(`Could not parse the filter query: expected ${p}.`)
  }
  const or = (): Pred => {
    let left = and()
    while (peek()?.kind === "punct" && peek()!.text === "||") {
      i++
      const l = left
      const r = and()
      left = (d) => l(d) || r(d)
    }
    return left
  }
  const and = (): Pred => {
    let left = primary()
    while (peek()?.kind === "punct" && peek()!.text === "&&") {
      i++
      const l = left
      const r = primary()
      left = (d) => l(d) && r(d)
    }
    return left
  }
  const value = (): string => {
    const t = take()
    if (t.kind === "quoted" || t.kind === "word") return t.text
    throw new FilterSyntaxError(`Could not parse the filter query: unexpected ${t.text}.`)
  }
  const primary = (): Pred => {
    const t = peek()
    if (t?.kind === "punct" && t.text === "(") {
      i++
      const inner = or()
      expectPunct(")")
      return inner
    }
    const nameTok = take()
    if (nameTok.kind !== "word") throw new FilterSyntaxError("Could not parse the filter query.")
    expectPunct(":")
    // The operator is glued to the value in Typesense syntax: `:=`, `:!=`, `:>=` …
    let op = ""
    const next = peek()
    if (next?.kind === "word") {
      const m = /^(!=|>=|<=|=|>|<)(.*)$/.exec(next.text)
      if (m) {
        op = m[1]!
        if (m[2] === "") i++
        else tokens[i] = { kind: "word", text: m[2]! }
      }
    }
    const field = c.fields.find((f) => f.name === nameTok.text)
    if (!field) throw notFound(`Could not find a filter field named \`${nameTok.text}\` in the schema.`)
    let values: Array<string>
    if (peek()?.kind === "punct" && peek()!.text === "[") {
      i++
      values = [value()]
      while (peek()?.kind === "punct" && peek()!.text === ",") {
        i++
        values.push(value())
      }
      expectPunct("]")
    } else values = [value()]
    return compare(field, op, values)
  }
  const pred = or()
  if (i !== tokens.length) throw new FilterSyntaxError(`Could not parse the filter query: unexpected ${tokens[i]!.text}.`)
  return pred
}

const compare = (field: Field, op: string, values: Array<string>): Pred => {
  const numeric = field.type === "float" || field.type.startsWith("int")
  if (numeric) {
    const nums = values.map((v) => {
      const n = Number(v)
      if (v.trim() === "" || Number.isNaN(n)) throw new FilterSyntaxError(`Numerical field has an invalid comparator value: ${v}`)
      return n
    })
    return (doc) => {
      const raw = read(doc, field.name)
      if (typeof raw !== "number") return op === "!="
      switch (op) {
        case "":
        case "=":
          return nums.includes(raw)
        case "!=":
          return !nums.includes(raw)
        case ">":
          return raw > nums[0]!
        case ">=":
          return raw >= nums[0]!
        case "<":
          return raw < nums[0]!
        case "<=":
          return raw <= nums[0]!
      }
      return false
    }
  }
  if (op !== "" && op !== "=" && op !== "!=") throw new FilterSyntaxError(`Cannot use ${op} on a ${field.type} field.`)
  return (doc) => {
    const keys = facetKeys(read(doc, field.name))
    if (keys.length === 0) return op === "!="
    if (op === "") return values.some((v) => keys.some((k) => words(k).join(" ").includes(words(v).join(" "))))
    const hit = keys.some((k) => values.includes(k))
    return op === "!=" ? !hit : hit
  }
}
