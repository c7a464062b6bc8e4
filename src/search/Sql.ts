/**
 * The sql backend: the index lives in a SQL database, so search needs no extra service and survives
 * restarts. SQLite: an FTS5 table; PostgreSQL: a `tsvector` column with a GIN index (and a
 * `pg_trgm` index on the vocabulary when the extension can be created).
 *
 * Text is tokenised in the process exactly as the memory backend does, and stored as its words, so
 * both answer alike. Typo expansion runs in the process over the cached vocabulary (every term
 * becomes the OR of its vocabulary words within the allowed edits). On PostgreSQL the rest is one
 * statement: the GIN index finds the matches, filters, facet counts, ranking and paging run in SQL
 * and only the page's documents come back (an ordered filter on a date, whose instant semantics
 * are JavaScript's, sends the query down the SQLite path instead). On SQLite, FTS5 finds the
 * candidates and filters, facets and ranking run in the process with the memory backend's code.
 * Reindex writes a new generation of the index and swaps the alias row in one transaction.
 *
 * ```ts
 * searchPlugin({ backend: Sql.backend(SqliteClient.layer({ filename: "app.db" })), indexes })
 * ```
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Chunk, Effect, Layer, Option, Stream } from "effect"
import * as DdlLock from "../kernel/schema/DdlLock.js"
import type { BackendFactory } from "./Backend.js"
import { SearchBackendError } from "./Errors.js"
import * as Matching from "./Matching.js"
import * as Rank from "./Rank.js"
import type { Document, Hit, IndexSpec, Query, Rebuild, Result, SearchBackendShape, WriteOp, WriteResult } from "./SearchBackend.js"
import { maxEdits, SearchBackend } from "./SearchBackend.js"
import * as SqlPg from "./SqlPg.js"
import * as Text from "./Text.js"

const vocabularyTtlMs = 60_000

/** Makes the backend over a SqlClient; creates its tables if missing. */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const pg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
  const p = (n: number) => pg ? `$${n}` : "?"
  const fail = (operation: string) => (error: SqlError) =>
    new SearchBackendError({ kind: "transient", backend: "sql", operation, message: `${error.message}: ${String(error.cause)}` })
  const run = (text: string, params: ReadonlyArray<unknown> = []) =>
    sql.unsafe<Record<string, unknown>>(text, params as Array<never>)

  // Replicas starting together would race on the DDL (PostgreSQL): one at a time, under a lock.
  yield* DdlLock.withDdlLock(DdlLock.keys.search)(Effect.gen(function*() {
    if (pg) {
      yield* run(`CREATE TABLE IF NOT EXISTS _fw_search_docs (
        idx TEXT NOT NULL, gen INTEGER NOT NULL, id TEXT NOT NULL, doc JSONB NOT NULL, tenant TEXT,
        body TEXT NOT NULL, tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
        PRIMARY KEY (idx, gen, id))`)
      yield* run(`CREATE INDEX IF NOT EXISTS _fw_search_docs_tsv ON _fw_search_docs USING GIN (tsv)`)
      yield* run(`CREATE INDEX IF NOT EXISTS _fw_search_docs_tenant ON _fw_search_docs (idx, gen, tenant)`)
      yield* run(`CREATE TABLE IF NOT EXISTS _fw_search_terms (idx TEXT NOT NULL, gen INTEGER NOT NULL, term TEXT NOT NULL, PRIMARY KEY (idx, gen, term))`)
      // Trigram index on the vocabulary, for operators: typo expansion itself is exact edit distance
      // in the process. In a savepoint: without the right to create the extension, the rest stands.
      const trgm = yield* Effect.either(sql.withTransaction(run(`CREATE EXTENSION IF NOT EXISTS pg_trgm`)))
      if (trgm._tag === "Right") yield* run(`CREATE INDEX IF NOT EXISTS _fw_search_terms_trgm ON _fw_search_terms USING GIN (term gin_trgm_ops)`)
    } else {
      yield* run(`CREATE TABLE IF NOT EXISTS _fw_search_docs (
        rid INTEGER PRIMARY KEY AUTOINCREMENT, idx TEXT NOT NULL, gen INTEGER NOT NULL, id TEXT NOT NULL,
        doc TEXT NOT NULL, tenant TEXT, body TEXT NOT NULL, UNIQUE (idx, gen, id))`)
      yield* run(`CREATE INDEX IF NOT EXISTS _fw_search_docs_tenant ON _fw_search_docs (idx, gen, tenant)`)
      yield* run(`CREATE VIRTUAL TABLE IF NOT EXISTS _fw_search_fts USING fts5(body, tokenize = 'unicode61 remove_diacritics 2')`)
      yield* run(`CREATE TABLE IF NOT EXISTS _fw_search_terms (idx TEXT NOT NULL, gen INTEGER NOT NULL, term TEXT NOT NULL, PRIMARY KEY (idx, gen, term))`)
    }
    yield* run(`CREATE TABLE IF NOT EXISTS _fw_search_alias (idx TEXT PRIMARY KEY, gen INTEGER NOT NULL)`)
  }))

  const specs = new Map<string, IndexSpec>()
  const specOf = (index: string): IndexSpec => specs.get(index) ?? { index, tenantField: "tenantId" }
  const vocabularies = new Map<string, { vocabulary: Text.Vocabulary; words: Set<string>; loadedAt: number }>()

  const liveGen = (index: string) =>
    Effect.map(run(`SELECT gen FROM _fw_search_alias WHERE idx = ${p(1)}`, [index]), (rows) => rows.length === 0 ? 0 : Number(rows[0]!["gen"]))

  const bodyOf = (spec: IndexSpec, doc: Document) => {
    const words: Array<string> = []
    for (const field of Text.searchableFields(spec, doc)) {
      const text = Text.textOf(doc[field])
      if (text !== undefined) words.push(...Text.tokenize(text))
    }
    return words
  }

  const removeIn = (index: string, gen: number, ids: ReadonlyArray<string>) =>
    pg ? Effect.asVoid(run(`DELETE FROM _fw_search_docs WHERE idx = $1 AND gen = $2 AND id = ANY($3::text[])`, [index, gen, ids])) : Effect.forEach(slices(ids, sqliteRows), (part) =>
      Effect.gen(function*() {
        // Two statements per slice, whatever its size: the text rows, then the documents.
        const marks = part.map(() => "?").join(", ")
        yield* run(`DELETE FROM _fw_search_fts WHERE rowid IN (SELECT rid FROM _fw_search_docs WHERE idx = ? AND gen = ? AND id IN (${marks}))`, [index, gen, ...part])
        yield* run(`DELETE FROM _fw_search_docs WHERE idx = ? AND gen = ? AND id IN (${marks})`, [index, gen, ...part])
      }), { discard: true })

  /**
   * PostgreSQL plans a text query well only with statistics on the documents: without them (a
   * fresh or bulk-loaded index, before autovacuum's first analyze) it walks the whole index through
   * the btree instead of the GIN index, 10–20× slower. So the process analyzes the table itself
   * after the first 10,000 documents it writes and again at 100,000, 1,000,000, ... (statistics of a
   * sample stay good as the table grows; autovacuum keeps them current after that).
   */
  let written = 0
  let analyzeAt = 10_000
  const analyzeAfter = (rows: number) =>
    Effect.suspend(() => {
      written += rows
      if (written < analyzeAt) return Effect.void
      analyzeAt = written * 10
      return Effect.asVoid(run(`ANALYZE _fw_search_docs`))
    })

  /** PostgreSQL: a batch is two statements (upsert from arrays, vocabulary). */
  const upsertPg = (index: string, gen: number, docs: ReadonlyArray<Document>) =>
    Effect.gen(function*() {
      const spec = specOf(index)
      // The last version of an id in a batch wins.
      const byId = new Map(docs.map((doc) => [doc.id, doc]))
      const batch = [...byId.values()]
      const bodies = batch.map((doc) => bodyOf(spec, doc))
      // One upsert, not delete-then-insert: replicas under fleet scope write the same document at
      // the same moment, and the second insert of a delete-then-insert pair would hit the key.
      yield* run(
        `INSERT INTO _fw_search_docs (idx, gen, id, doc, tenant, body)
         SELECT $1, $2, u.id, u.doc::jsonb, u.tenant, u.body FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS u(id, doc, tenant, body)
         ON CONFLICT (idx, gen, id) DO UPDATE SET doc = EXCLUDED.doc, tenant = EXCLUDED.tenant, body = EXCLUDED.body`,
        [
          index,
          gen,
          batch.map((doc) => doc.id),
          batch.map((doc) => JSON.stringify(doc)),
          batch.map((doc) => typeof doc[spec.tenantField] === "string" ? doc[spec.tenantField] as string : null),
          bodies.map((words, i) => {
            const tenant = batch[i]![spec.tenantField]
            return typeof tenant === "string" ? `${words.join(" ")} ${SqlPg.tenantWord(tenant)}` : words.join(" ")
          })
        ]
      )
      yield* analyzeAfter(batch.length)
      const cached = vocabularies.get(`${index}:${gen}`)
      const unseen = [...new Set(bodies.flat())].filter((word) => cached === undefined || !cached.words.has(word))
      if (unseen.length > 0) {
        yield* run(`INSERT INTO _fw_search_terms (idx, gen, term) SELECT $1, $2, unnest($3::text[]) ON CONFLICT DO NOTHING`, [index, gen, unseen])
        if (cached !== undefined) {
          for (const word of unseen) {
            cached.words.add(word)
            cached.vocabulary.add(word)
          }
        }
      }
    })

  /** SQLite: a batch is a few statements whatever its size (removal, documents, text rows, vocabulary). */
  const upsertSqlite = (index: string, gen: number, docs: ReadonlyArray<Document>) =>
    Effect.gen(function*() {
      const spec = specOf(index)
      // The last version of an id in a batch wins.
      const batch = [...new Map(docs.map((doc) => [doc.id, doc])).values()]
      yield* removeIn(index, gen, batch.map((doc) => doc.id))
      const seen = new Set<string>()
      for (const part of slices(batch, sqliteRows / 5)) {
        const values: Array<unknown> = []
        for (const doc of part) {
          const words = bodyOf(spec, doc)
          for (const word of words) seen.add(word)
          const tenant = doc[spec.tenantField]
          values.push(index, gen, doc.id, JSON.stringify(doc), typeof tenant === "string" ? tenant : null, words.join(" "))
        }
        const inserted = yield* run(
          `INSERT INTO _fw_search_docs (idx, gen, id, doc, tenant, body) VALUES ${part.map(() => "(?, ?, ?, ?, ?, ?)").join(", ")} RETURNING rid, body`,
          values
        )
        yield* run(`INSERT INTO _fw_search_fts (rowid, body) VALUES ${inserted.map(() => "(?, ?)").join(", ")}`, inserted.flatMap((row) => [row["rid"], row["body"]]))
      }
      const cached = vocabularies.get(`${index}:${gen}`)
      const unseen = [...seen].filter((word) => cached === undefined || !cached.words.has(word))
      for (const fresh of slices(unseen, sqliteRows / 2)) {
        yield* run(`INSERT INTO _fw_search_terms (idx, gen, term) VALUES ${fresh.map(() => "(?, ?, ?)").join(", ")} ON CONFLICT DO NOTHING`, fresh.flatMap((word) => [index, gen, word]))
        if (cached !== undefined) {
          for (const word of fresh) {
            cached.words.add(word)
            cached.vocabulary.add(word)
          }
        }
      }
    })

  const upsertIn = (index: string, gen: number, docs: ReadonlyArray<Document>) =>
    docs.length === 0 ? Effect.void : pg ? upsertPg(index, gen, docs) : upsertSqlite(index, gen, docs)

  /** A batch of removals and upserts (distinct ids) in one transaction. */
  const writeIn = (index: string, gen: number, ops: ReadonlyArray<WriteOp>) => {
    const removed: Array<string> = []
    const docs: Array<Document> = []
    for (const op of ops) {
      if (op.doc === null) removed.push(op.id)
      else docs.push(op.doc)
    }
    return Effect.zipRight(removed.length === 0 ? Effect.void : removeIn(index, gen, removed), upsertIn(index, gen, docs))
  }

  /**
   * The vocabulary of a generation: cached and kept current with this process's writes; re-read
   * after a minute for words other processes added (until then their new words match exactly only).
   */
  const vocabularyOf = (index: string, gen: number) =>
    Effect.gen(function*() {
      const key = `${index}:${gen}`
      const cached = vocabularies.get(key)
      if (cached !== undefined && Date.now() - cached.loadedAt < vocabularyTtlMs) return cached.vocabulary
      const rows = yield* run(`SELECT term FROM _fw_search_terms WHERE idx = ${p(1)} AND gen = ${p(2)}`, [index, gen])
      const vocabulary = new Text.Vocabulary()
      const words = new Set<string>()
      for (const row of rows) {
        const term = String(row["term"])
        words.add(term)
        vocabulary.add(term)
      }
      vocabularies.set(key, { vocabulary, words, loadedAt: Date.now() })
      return vocabulary
    })

  const quoteFts = (word: string) => `"${word.replace(/"/g, "\"\"")}"`

  /** PostgreSQL answers the whole query in one statement (see `SqlPg.statement`). */
  const queryInPg = (
    query: Query,
    baseWhere: string,
    baseParams: ReadonlyArray<unknown>,
    expansions: ReadonlyArray<ReadonlyArray<readonly [string, number]>> | undefined
  ): Effect.Effect<Result, SqlError> => {
    const statement = SqlPg.statement(query, baseWhere, baseParams, expansions)
    return Effect.map(run(statement.text, statement.params), (rows) => {
      const { facets, found, page } = SqlPg.answer(query, rows)
      const spec = specOf(String(baseParams[0]))
      const matchedWords = matchedWordsOf(expansions ?? [])
      const hits = page.map((doc): Hit => highlighted(spec, query, doc, matchedWords, expansions === undefined))
      return { hits, facets, found }
    })
  }

  /** Highlights mark every word within the allowed edits of a term (as the memory backend does). */
  const matchedWordsOf = (expansions: ReadonlyArray<ReadonlyArray<readonly [string, number]>>) =>
    new Set(expansions.flatMap((words) => words.map(([word]) => word)))

  const highlighted = (spec: IndexSpec, query: Query, doc: Document, matchedWords: ReadonlySet<string>, noTerms: boolean): Hit => {
    if (query.highlight === undefined || noTerms) return { doc }
    const highlights: Record<string, string> = {}
    for (const field of query.highlight.fields) {
      const value = Text.textOf(doc[field])
      if (value === undefined || field === spec.tenantField) continue
      const marked = Text.highlight(value, matchedWords, query.highlight.preTag, query.highlight.postTag)
      if (marked !== undefined) highlights[field] = marked
    }
    return { doc, highlights }
  }

  const query = (index: string, query: Query): Effect.Effect<Result, SqlError> =>
    Effect.gen(function*() {
      const spec = specOf(index)
      const gen = yield* liveGen(index)
      const terms = [...new Set(Text.tokenize(query.q))]
      const expansions: Array<Array<readonly [string, number]>> = []
      if (terms.length > 0) {
        const vocabulary = yield* vocabularyOf(index, gen)
        for (const term of terms) {
          const edits = maxEdits(query.fuzziness, term)
          const words = edits === 0 ? [[term, 0] as const] : vocabulary.search(term, edits)
          if (words.length === 0) return { hits: [], facets: Matching.countFacets(query.facets, []), found: 0 }
          expansions.push(words)
        }
      }
      // The tenant filter (always first, an eq on the tenant field) narrows in SQL.
      const tenantFilter = query.filters.find((f) => f.field === spec.tenantField && f.op === "eq" && typeof f.value === "string")
      const params: Array<unknown> = [index, gen]
      let where = `d.idx = ${p(1)} AND d.gen = ${p(2)}`
      if (tenantFilter !== undefined) {
        params.push(tenantFilter.value)
        where += ` AND d.tenant = ${p(params.length)}`
      }
      let text: string
      if (terms.length === 0) {
        text = `SELECT d.doc FROM _fw_search_docs d WHERE ${where}`
      } else if (pg) {
        const tenantTerm = tenantFilter !== undefined ? ` & '${SqlPg.tenantWord(tenantFilter.value as string)}'` : ""
        params.push(expansions.map((words) => `(${words.map(([word]) => `'${word}'`).join(" | ")})`).join(" & ") + tenantTerm)
        where += ` AND d.tsv @@ to_tsquery('simple', ${p(params.length)})`
        text = `SELECT d.doc FROM _fw_search_docs d WHERE ${where}`
      } else {
        params.push(expansions.map((words) => `(${words.map(([word]) => quoteFts(word)).join(" OR ")})`).join(" AND "))
        text = `SELECT d.doc FROM _fw_search_fts f JOIN _fw_search_docs d ON d.rid = f.rowid WHERE ${where} AND _fw_search_fts MATCH ?`
      }
      if (pg && !query.filters.some((filter) => SqlPg.isOrdered(filter) && typeof filter.value !== "number")) {
        return yield* queryInPg(query, where, params, terms.length === 0 ? undefined : expansions)
      }
      const rows = yield* run(text, params)
      const accept = Matching.predicateAll(query.filters)
      const scored: Array<{ readonly doc: Document; readonly score: number }> = []
      for (const row of rows) {
        const doc = (typeof row["doc"] === "string" ? JSON.parse(row["doc"]) : row["doc"]) as Document
        if (!accept(doc)) continue
        let score = 0
        if (terms.length > 0) {
          const words = bodyOf(spec, doc)
          const counts = new Map<string, number>()
          for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1)
          for (const expansion of expansions) {
            let best = 0
            for (const [word, distance] of expansion) {
              const tf = counts.get(word)
              if (tf !== undefined) best = Math.max(best, Rank.contribution(distance, tf, words.length))
            }
            score += best
          }
        }
        scored.push({ doc, score })
      }
      const facets = Matching.countFacets(query.facets, scored.map((entry) => entry.doc))
      scored.sort((a, b) => b.score - a.score || Rank.compareIds(a.doc.id, b.doc.id))
      const matchedWords = matchedWordsOf(expansions)
      const hits: Array<Hit> = scored.slice(query.offset, query.offset + query.limit).map(({ doc }) =>
        highlighted(spec, query, doc, matchedWords, terms.length === 0)
      )
      return { hits, facets, found: scored.length }
    })

  const dropGen = (index: string, gen: number) =>
    Effect.gen(function*() {
      if (!pg) yield* run(`DELETE FROM _fw_search_fts WHERE rowid IN (SELECT rid FROM _fw_search_docs WHERE idx = ? AND gen = ?)`, [index, gen])
      yield* run(`DELETE FROM _fw_search_docs WHERE idx = ${p(1)} AND gen = ${p(2)}`, [index, gen])
      yield* run(`DELETE FROM _fw_search_terms WHERE idx = ${p(1)} AND gen = ${p(2)}`, [index, gen])
      vocabularies.delete(`${index}:${gen}`)
    })

  const backend: SearchBackendShape = {
    name: "sql",
    durable: true,
    ensureIndex: (spec) =>
      Effect.gen(function*() {
        specs.set(spec.index, spec)
        yield* run(`INSERT INTO _fw_search_alias (idx, gen) VALUES (${p(1)}, 0) ON CONFLICT (idx) DO NOTHING`, [spec.index])
      }).pipe(Effect.mapError(fail("ensureIndex"))),
    upsert: (index, docs) =>
      sql.withTransaction(Effect.flatMap(liveGen(index), (gen) => upsertIn(index, gen, docs))).pipe(Effect.mapError(fail("upsert"))),
    remove: (index, ids) =>
      sql.withTransaction(Effect.flatMap(liveGen(index), (gen) => removeIn(index, gen, ids))).pipe(Effect.mapError(fail("remove"))),
    write: (index, ops) =>
      sql.withTransaction(Effect.flatMap(liveGen(index), (gen) => writeIn(index, gen, ops))).pipe(Effect.as(applied), Effect.mapError(fail("write"))),
    query: (index, q) => query(index, q).pipe(Effect.mapError(fail("query"))),
    documents: (index) =>
      Stream.unwrap(Effect.map(liveGen(index), (gen) =>
        Stream.paginateChunkEffect("", (after: string) =>
          Effect.map(
            run(`SELECT id, doc FROM _fw_search_docs WHERE idx = ${p(1)} AND gen = ${p(2)} AND id > ${p(3)} ORDER BY id LIMIT 500`, [index, gen, after]),
            (rows): readonly [Chunk.Chunk<Document>, Option.Option<string>] => {
              const docs = rows.map((row) => (typeof row["doc"] === "string" ? JSON.parse(row["doc"]) : row["doc"]) as Document)
              return [Chunk.unsafeFromArray(docs), docs.length === 500 ? Option.some(docs[docs.length - 1]!.id) : Option.none()]
            }
          ))
      )).pipe(Stream.mapError(fail("documents"))),
    rebuild: (spec) =>
      Effect.gen(function*() {
        specs.set(spec.index, spec)
        const [row] = yield* run(`SELECT COALESCE(MAX(gen), 0) AS gen FROM _fw_search_docs WHERE idx = ${p(1)}`, [spec.index])
        const current = yield* liveGen(spec.index)
        const gen = Math.max(Number(row?.["gen"] ?? 0), current) + 1
        yield* dropGen(spec.index, gen)
        let done = false
        const rebuild: Rebuild = {
          upsert: (docs) => sql.withTransaction(upsertIn(spec.index, gen, docs)).pipe(Effect.mapError(fail("reindex"))),
          remove: (ids) => sql.withTransaction(removeIn(spec.index, gen, ids)).pipe(Effect.mapError(fail("reindex"))),
          swap: Effect.gen(function*() {
            if (done) return
            done = true
            yield* sql.withTransaction(Effect.gen(function*() {
              const previous = yield* liveGen(spec.index)
              yield* run(`UPDATE _fw_search_alias SET gen = ${p(1)} WHERE idx = ${p(2)}`, [gen, spec.index])
              yield* dropGen(spec.index, previous)
            }))
          }).pipe(Effect.mapError(fail("reindex"))),
          abort: Effect.suspend(() => {
            if (done) return Effect.void
            done = true
            return dropGen(spec.index, gen).pipe(Effect.ignore)
          })
        }
        return rebuild
      }).pipe(Effect.mapError(fail("reindex")))
  }
  return backend
})

/** The sql backend over the database `client` connects to (a separate connection from the store's). */
export const backend = <E>(client: Layer.Layer<SqlClient.SqlClient, E>): BackendFactory => ({
  _tag: "SearchBackendFactory",
  name: "sql",
  durable: true,
  hosts: [],
  make: Effect.flatMap(Layer.build(client), (context) => Effect.provide(make, context))
})

/** The sql backend as the `SearchBackend` service, over the provided SqlClient. */
export const layer: Layer.Layer<SearchBackend, SqlError, SqlClient.SqlClient> = Layer.effect(SearchBackend, make)

/** Rows per SQLite statement at most (each row binds up to 6 parameters: far under SQLite's limit). */
const sqliteRows = 500

const applied: WriteResult = { refused: [] }

const slices = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
