/**
 * The PostgreSQL query of the sql backend (see `Sql`): the whole search — text match, filters,
 * facet counts, ranking and the page — as one statement over `_fw_search_docs`, and its rows read
 * back. SQLite answers the same queries with FTS5 and the in-process matching of `Sql`.
 */
import * as Rank from "./Rank.js"
import type { Document, Filter, Query } from "./SearchBackend.js"

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
 * The statement of a query: the matched set is materialised once, and its size, its facet counts
 * and its page (ranked as `Rank` says) come back; only the page's documents cross the wire. `baseWhere`/`baseParams` already select the index (its name the first parameter),
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
  let score = "0::float8 AS score"
  let lateral = ""
  if (expansions !== undefined) {
    // The ranking of `Rank`, term for term: per term, its best word present in the document, by
    // distance, term frequency (the positions the tsvector keeps for it) and the document's length
    // (its words: the spaces of `body`, which ends with the tenant word when there is a tenant).
    const t: Array<number> = []
    const word: Array<string> = []
    const weight: Array<number> = []
    expansions.forEach((words, i) =>
      words.forEach(([w, distance]) => {
        t.push(i)
        word.push(w)
        weight.push(Rank.distanceWeight[distance] ?? 0.1)
      })
    )
    const length = `(length(d.body) - length(replace(d.body, ' ', '')) + CASE WHEN d.tenant IS NULL THEN 1 ELSE 0 END)::float8`
    lateral = ` CROSS JOIN LATERAL (
      SELECT COALESCE(sum(b.c), 0)::float8 AS score FROM (
        SELECT max(floor(x.wt * sqrt(COALESCE(array_length(u.positions, 1), 1)::float8 / ${length}) * ${Rank.scale})) AS c
        FROM unnest(d.tsv) u
        JOIN unnest(${param(t)}::int[], ${param(word)}::text[], ${param(weight)}::float8[]) AS x(t, word, wt) ON x.word = u.lexeme
        GROUP BY x.t) b) s`
    score = "s.score"
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
  const text = `WITH m AS MATERIALIZED (SELECT d.id, d.doc, ${score} FROM _fw_search_docs d${lateral} WHERE ${where}),
    p AS (SELECT m.doc, row_number() OVER (ORDER BY m.score DESC, m.id COLLATE "C") AS ord FROM m
          ORDER BY m.score DESC, m.id COLLATE "C" LIMIT ${limit} OFFSET ${offset})
    ${parts.join(" UNION ALL ")}`
  return { text, params }
}

/** What the rows of `statement` say: the count, the facets, the page in rank order. */
export const answer = (query: Query, rows: ReadonlyArray<Readonly<Record<string, unknown>>>) => {
  let found = 0
  // Maps, then own keys: a value such as "__proto__" or "constructor" (a user's tag) is a key like any other.
  const counts = new Map<string, Map<string, number>>(query.facets.map((field) => [field, new Map()]))
  const page: Array<readonly [number, Document]> = []
  for (const row of rows) {
    const kind = Number(row["kind"])
    if (kind === 0) found = Number(row["n"])
    else if (kind === 1) counts.get(query.facets[Number(row["facet"]) - 1]!)!.set(String(row["value"]), Number(row["n"]))
    else if (kind === 2) page.push([Number(row["n"]), (typeof row["doc"] === "string" ? JSON.parse(row["doc"]) : row["doc"]) as Document])
  }
  page.sort((a, b) => a[0] - b[0])
  const facets = Object.fromEntries([...counts].map(([field, values]) => [field, Object.fromEntries(values)]))
  return { found, facets, page: page.map(([, doc]) => doc) }
}
