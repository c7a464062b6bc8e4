/**
 * The PostgreSQL query of the sql backend (see `Sql`): the whole search — text match, filters,
 * facet counts, ranking and the page — as one statement over `_fw_search_docs`, and its rows read
 * back. SQLite answers the same queries with FTS5 and the in-process matching of `Sql`.
 */
import type { Document, Filter, Query } from "./SearchBackend.js"

/** The score of a vocabulary word by its edit distance from the term (0, 1, 2 edits). */
export const distanceWeight = [1, 0.35, 0.15]

/**
 * The tenant is also a word of the document's tsvector, so one GIN lookup answers
 * "these terms in this tenant" (hex keeps any tenant id a single word of the simple parser).
 */
export const tenantWord = (tenant: string) => `zzt${Buffer.from(tenant, "utf8").toString("hex")}`

/** An ordered comparison (`gt`, `gte`, `lt`, `lte`). */
export const isOrdered = (filter: Filter) => filter.op === "gt" || filter.op === "gte" || filter.op === "lt" || filter.op === "lte"

/** A JSON value as the list of its elements (a scalar as a list of one; SQL NULL as `[null]`). */
const wrap = (value: string) => `(CASE jsonb_typeof(${value}) WHEN 'array' THEN ${value} ELSE jsonb_build_array(${value}) END)`

/**
 * One filter as a PostgreSQL condition on `d.doc`, with the semantics of `Matching.predicate`:
 * any element of a list matches; jsonb equality is JavaScript's `===` on JSON scalars; ordered
 * operators compare numbers only (an ordered filter on a date runs in the process instead).
 */
const filterSql = (filter: Filter, param: (value: unknown) => string): string => {
  const path = `${param(filter.field.split("."))}::text[]`
  const elements = `jsonb_array_elements(${wrap(`d.doc #> ${path}`)}) e`
  if (isOrdered(filter)) {
    const op = filter.op === "gt" ? ">" : filter.op === "gte" ? ">=" : filter.op === "lt" ? "<" : "<="
    // PostgreSQL may evaluate the cast before the type test of an AND: the CASE guards it.
    return `EXISTS (SELECT 1 FROM ${elements} WHERE (CASE WHEN jsonb_typeof(e) = 'number' THEN e::numeric END) ${op} ${param(filter.value)}::numeric)`
  }
  const values = (Array.isArray(filter.value) ? filter.value : [filter.value]).map((value) => JSON.stringify(value))
  const any = `EXISTS (SELECT 1 FROM ${elements} WHERE e = ANY(${param(values)}::text[]::jsonb[]))`
  return filter.op === "eq" || filter.op === "in" ? any : `NOT ${any}`
}

/**
 * The statement of a query: the matched set is materialised once, and its size, its facet counts,
 * its page (ranked) and, for highlights, the words it matched come back; only the page's documents
 * cross the wire. `baseWhere`/`baseParams` already select the index (its name the first parameter),
 * the tenant and the text match; the filters are added here. `expansions`: per term, its vocabulary
 * words and their edit distances (none: no text terms).
 */
export const statement = (
  query: Query,
  baseWhere: string,
  baseParams: ReadonlyArray<unknown>,
  expansions: ReadonlyArray<ReadonlyArray<readonly [string, number]>> | undefined
): { readonly text: string; readonly params: ReadonlyArray<unknown> } => {
  const params = [...baseParams]
  const param = (value: unknown) => {
    params.push(value)
    return `$${params.length}`
  }
  let where = baseWhere
  for (const filter of query.filters) where += ` AND ${filterSql(filter, param)}`
  let score = "0::float8 AS score, ARRAY[]::text[] AS words"
  let lateral = ""
  if (expansions !== undefined) {
    // Per term, its closest vocabulary word present in the document, weighted by distance and
    // term frequency (the positions the tsvector keeps for it): the in-process formula.
    const t: Array<number> = []
    const word: Array<string> = []
    const rank: Array<number> = []
    const weight: Array<number> = []
    expansions.forEach((words, i) =>
      words.forEach(([w, distance], r) => {
        t.push(i)
        word.push(w)
        rank.push(r)
        weight.push(distanceWeight[distance] ?? 0.1)
      })
    )
    lateral = ` CROSS JOIN LATERAL (
      SELECT COALESCE(sum(b.wt * (1 + ln(b.tf))), 0)::float8 AS score, array_agg(b.word) AS words FROM (
        SELECT DISTINCT ON (x.t) x.wt, x.word, COALESCE(array_length(u.positions, 1), 1) AS tf
        FROM unnest(d.tsv) u
        JOIN unnest(${param(t)}::int[], ${param(word)}::text[], ${param(rank)}::int[], ${param(weight)}::float8[]) AS x(t, word, r, wt) ON x.word = u.lexeme
        ORDER BY x.t, x.r) b) s`
    score = "s.score, s.words"
  }
  const limit = param(query.limit)
  const offset = param(query.offset)
  const facetFields = param(query.facets)
  const parts = [
    `SELECT 0 AS kind, NULL::int AS facet, NULL::text AS value, count(*)::int AS n, NULL::jsonb AS doc FROM m`,
    `SELECT 1, f.ord::int, v.k, count(*)::int, NULL FROM m
       CROSS JOIN unnest(${facetFields}::text[]) WITH ORDINALITY AS f(path, ord)
       CROSS JOIN LATERAL (SELECT CASE jsonb_typeof(e) WHEN 'string' THEN e #>> '{}' WHEN 'number' THEN e::text WHEN 'boolean' THEN e::text END AS k
         FROM jsonb_array_elements(${wrap("m.doc #> string_to_array(f.path, '.')")}) e) v
       WHERE v.k IS NOT NULL GROUP BY f.ord, v.k`,
    `SELECT 2, NULL, NULL, p.ord::int, p.doc FROM p`
  ]
  if (query.highlight !== undefined && expansions !== undefined) parts.push(`SELECT DISTINCT 3, NULL::int, w, 0, NULL::jsonb FROM m, unnest(m.words) w`)
  const text = `WITH m AS MATERIALIZED (SELECT d.id, d.doc, ${score} FROM _fw_search_docs d${lateral} WHERE ${where}),
    p AS (SELECT m.doc, row_number() OVER (ORDER BY m.score DESC, m.id COLLATE "C") AS ord FROM m
          ORDER BY m.score DESC, m.id COLLATE "C" LIMIT ${limit} OFFSET ${offset})
    ${parts.join(" UNION ALL ")}`
  return { text, params }
}

/** What the rows of `statement` say: the count, the facets, the page in rank order, the matched words. */
export const answer = (query: Query, rows: ReadonlyArray<Readonly<Record<string, unknown>>>) => {
  let found = 0
  // Maps, then own keys: a value such as "__proto__" or "constructor" (a user's tag) is a key like any other.
  const counts = new Map<string, Map<string, number>>(query.facets.map((field) => [field, new Map()]))
  const page: Array<readonly [number, Document]> = []
  const matchedWords = new Set<string>()
  for (const row of rows) {
    const kind = Number(row["kind"])
    if (kind === 0) found = Number(row["n"])
    else if (kind === 1) counts.get(query.facets[Number(row["facet"]) - 1]!)!.set(String(row["value"]), Number(row["n"]))
    else if (kind === 2) page.push([Number(row["n"]), (typeof row["doc"] === "string" ? JSON.parse(row["doc"]) : row["doc"]) as Document])
    else matchedWords.add(String(row["value"]))
  }
  page.sort((a, b) => a[0] - b[0])
  const facets = Object.fromEntries([...counts].map(([field, values]) => [field, Object.fromEntries(values)]))
  return { found, facets, page: page.map(([, doc]) => doc), matchedWords }
}
