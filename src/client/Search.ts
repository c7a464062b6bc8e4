/**
 * Search in the browser, framework-agnostic: a store over the search plugin's `search.query`
 * action (spec 2.3, 4.2). `run(q, {limit, offset}?)` issues the query; the store holds the hit
 * documents and facet counts of the last run and whether one is pending. Only the latest run
 * lands (a search box firing on every keystroke never shows an older answer last). Results are
 * not live: `search.query` is an action, run again to refresh.
 *
 * ```ts
 * const search = Search.make(api, "notes", { facets: ["tag"] })
 * search.subscribe(() => render(search.getSnapshot()))   // {results, facets, pending, error, ...}
 * search.run("milk")
 * ```
 *
 * Mount with the search errors to get them typed: `mount({apis, errors: searchErrors})` with
 * `searchErrors` from `@fw/framework/search/errors`.
 */
import { Schema } from "effect"
import type { Api } from "./Api.js"
import type { Readable } from "./Stores.js"
import type { ClientError } from "./Errors.js"

// The wire schemas of `search.query`, as the server declares them in src/search/Query.ts (the
// client may not import an area; test/client/Search.test.ts checks that the two stay equal).
const ScalarSchema = Schema.Union(Schema.String, Schema.Number, Schema.Boolean)

const Filter = Schema.Struct({
  field: Schema.String,
  op: Schema.Literal("eq", "neq", "gt", "gte", "lt", "lte", "in", "nin"),
  value: Schema.Union(ScalarSchema, Schema.Array(ScalarSchema))
})

/** The handler-less contract of the search plugin's `search.query` action. */
export const query = {
  tag: "search.query",
  kind: "action",
  input: Schema.Struct({
    index: Schema.String,
    q: Schema.optional(Schema.String.pipe(Schema.maxLength(1000))),
    limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 1000))),
    offset: Schema.optional(Schema.Int.pipe(Schema.between(0, 100_000))),
    fuzziness: Schema.optional(Schema.Union(Schema.Literal("auto"), Schema.Literal(0, 1, 2))),
    filters: Schema.optional(Schema.Array(Filter).pipe(Schema.maxItems(50))),
    facets: Schema.optional(Schema.Array(Schema.String).pipe(Schema.maxItems(20))),
    highlight: Schema.optional(Schema.Struct({
      fields: Schema.Array(Schema.String).pipe(Schema.maxItems(20)),
      preTag: Schema.String.pipe(Schema.maxLength(100)),
      postTag: Schema.String.pipe(Schema.maxLength(100))
    })),
    engineParams: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
  }),
  output: Schema.Struct({
    hits: Schema.Array(Schema.Struct({
      doc: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
      highlights: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
    })),
    facets: Schema.Record({ key: Schema.String, value: Schema.Record({ key: Schema.String, value: Schema.Number }) }),
    found: Schema.Number
  })
} as const

/** The input of `search.query`. */
export type QueryInput = Schema.Schema.Type<typeof query.input>
/** The output of `search.query`. */
export type QueryOutput = Schema.Schema.Type<typeof query.output>
/** One filter (ANDed with the others and with the caller's tenant, which the server adds). */
export type SearchFilter = Schema.Schema.Type<typeof Filter>

/** The fixed part of a store's queries: everything but the index, `q`, `limit` and `offset`. */
export type SearchOptions = Omit<QueryInput, "index" | "q" | "offset">

/** The per-run part: the window, and filters replacing the store's. */
export interface RunOptions {
  readonly limit?: number
  readonly offset?: number
  readonly filters?: ReadonlyArray<SearchFilter>
}

/** The state of a search store (`E`: the area errors the api was given). */
export interface SearchState<E = never> {
  /** Whether a run is in flight (the previous results stay until it lands). */
  readonly pending: boolean
  /** The hit documents of the last run that succeeded. */
  readonly results: ReadonlyArray<Readonly<Record<string, unknown>>>
  /** The hits with their highlights. */
  readonly hits: QueryOutput["hits"]
  /** Per-field value counts over the full matched set of the last run. */
  readonly facets: QueryOutput["facets"]
  /** How many documents matched the last run. */
  readonly found: number
  /** The query text of the last run that landed; undefined before the first. */
  readonly q: string | undefined
  /** Why the last run failed (`SearchIndexNotFound`, `SearchFieldRejected`, `Disconnected`, ...); cleared by the next success. */
  readonly error: ClientError<E> | undefined
}

/** A search store: its state, and `run` to issue a query. */
export interface SearchStore<E = never> extends Readable<SearchState<E>> {
  readonly index: string
  /**
   * Issues the query `q` (with the store's options and `options`); resolves once it has landed or
   * been superseded by a later run. Never rejects: a failure lands in `error`.
   */
  readonly run: (q: string, options?: RunOptions) => Promise<void>
}

const initial: SearchState<never> = { pending: false, results: [], hits: [], facets: {}, found: 0, q: undefined, error: undefined }

/** A search store over `index` of `api`'s search plugin; nothing is sent until `run`. */
export const make = <E>(api: Api<E>, index: string, options: SearchOptions = {}): SearchStore<E> => {
  let state: SearchState<E> = initial
  const listeners = new Set<() => void>()
  const set = (next: SearchState<E>) => {
    state = next
    for (const listener of [...listeners]) listener()
  }
  let latest = 0
  return {
    index,
    getSnapshot: () => state,
    subscribe: (listener) => {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    run: (q, run = {}) => {
      const id = ++latest
      if (!state.pending) set({ ...state, pending: true })
      const input: QueryInput = {
        ...options,
        index,
        q,
        ...(run.limit !== undefined ? { limit: run.limit } : {}),
        ...(run.offset !== undefined ? { offset: run.offset } : {}),
        ...(run.filters !== undefined ? { filters: run.filters } : {})
      }
      return api.call(query, input).then(
        (output) => {
          if (id !== latest) return
          set({
            pending: false,
            results: output.hits.map((hit) => hit.doc),
            hits: output.hits,
            facets: output.facets,
            found: output.found,
            q,
            error: undefined
          })
        },
        (error: ClientError<E>) => {
          if (id !== latest) return
          set({ ...state, pending: false, q, error })
        }
      )
    }
  }
}
