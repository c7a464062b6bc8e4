/**
 * The backend conformance suite: the same documents, queries, filters, facets, highlights and
 * tenant isolation must give the same answers on every backend (spec 2.3; semantics in
 * `src/search/SearchBackend.ts`). Call `conformance(name, layer)` from a test file; an engine
 * backend with its own typo rules passes `{ typoSemantics: "engine" }` to skip the exact
 * edit-distance cases (spec 2.3: engineB and engineC only toggle typo tolerance).
 */
import { assert, describe, it } from "@effect/vitest"
import type { Layer } from "effect"
import { Chunk, Effect, Stream } from "effect"
import type { Document, Filter, IndexSpec, Query } from "../../../src/search/SearchBackend.js"
import { SearchBackend } from "../../../src/search/SearchBackend.js"

/** Options of the suite. */
export interface ConformanceOptions {
  /** `exact` (default): typo cases check Levenshtein distances exactly; `engine`: only that typos are tolerated or not. */
  readonly typoSemantics?: "exact" | "engine"
  /** Index name prefix, so suites sharing an engine do not collide. */
  readonly prefix?: string
}

/** The index spec the suite uses. */
export const spec = (index: string): IndexSpec => ({
  index,
  tenantField: "tenantId",
  searchableFields: ["title", "body", "tags"],
  fields: {
    tenantId: "string",
    title: "string",
    body: "string",
    tags: "string[]",
    brand: "string",
    price: "number",
    published: "date",
    inStock: "boolean"
  }
})

/** The suite's documents: two tenants, overlapping words. */
export const documents: ReadonlyArray<Document> = [
  { id: "a1", tenantId: "t1", title: "Wireless headphones", body: "Noise cancelling over-ear headphones with long battery life", tags: ["audio", "travel"], brand: "Sonic", price: 199, published: "2024-03-01T10:00:00Z", inStock: true },
  { id: "a2", tenantId: "t1", title: "Wired headphones", body: "Studio headphones for mixing", tags: ["audio", "studio"], brand: "Sonic", price: 89, published: "2023-11-15T08:30:00Z", inStock: false },
  { id: "a3", tenantId: "t1", title: "Bluetooth speaker", body: "Portable speaker, waterproof", tags: ["audio"], brand: "Boom", price: 59.5, published: "2024-06-20T00:00:00Z", inStock: true },
  { id: "a4", tenantId: "t1", title: "Phone case", body: "Slim case for phones", tags: ["accessories"], brand: "Shell", price: 15, published: "2022-01-10", inStock: true },
  { id: "a5", tenantId: "t1", title: "<script>alert(1)</script> headphones & more", body: "Tagged \"quotes\" and 'apostrophes'", tags: [], brand: "Evil & Co", price: 1, published: "2021-05-05T05:05:05Z", inStock: true },
  { id: "a6", tenantId: "t1", title: "Café crème grinder", body: "Grinds coffee beans for crème brûlée fans", tags: ["kitchen"], brand: "Bean", price: 120, published: "2024-01-01T00:00:00Z", inStock: false },
  { id: "b1", tenantId: "t2", title: "Wireless headphones", body: "Tenant two's headphones", tags: ["audio"], brand: "Sonic", price: 250, published: "2024-04-01T00:00:00Z", inStock: true },
  { id: "b2", tenantId: "t2", title: "Headphone stand", body: "Holds headphones", tags: ["accessories"], brand: "Stand", price: 25, published: "2024-02-02T00:00:00Z", inStock: true }
]

const tenant = (t: string): Filter => ({ field: "tenantId", op: "eq", value: t })

/** A query with the suite's defaults. */
export const query = (q: string, more: Partial<Query> = {}, t = "t1"): Query => ({
  q,
  limit: 20,
  offset: 0,
  fuzziness: 0,
  facets: [],
  engineParams: {},
  ...more,
  filters: [tenant(t), ...(more.filters ?? [])]
})

const ids = (result: { readonly hits: ReadonlyArray<{ readonly doc: Document }> }) => result.hits.map((hit) => hit.doc.id)
const sorted = (values: ReadonlyArray<string>) => [...values].sort()

/** Runs the conformance suite on the backend built by `layer` (a fresh backend per test). */
export const conformance = (name: string, layer: () => Layer.Layer<SearchBackend, unknown>, options: ConformanceOptions = {}) =>
  describe(`search backend conformance: ${name}`, () => {
    let counter = 0
    const fresh = <A, E>(body: (index: string) => Effect.Effect<A, E, SearchBackend>) =>
      Effect.gen(function*() {
        const backend = yield* SearchBackend
        const index = `${options.prefix ?? "conf"}_${Date.now().toString(36)}_${counter++}`
        if (backend.ensureIndex) yield* backend.ensureIndex(spec(index))
        yield* backend.upsert(index, documents)
        return yield* body(index)
      }).pipe(Effect.provide(layer()))

    const run = (index: string, q: Query) => Effect.flatMap(SearchBackend, (backend) => backend.query(index, q))

    it.live("matches every term (AND) in the caller's tenant only", () =>
      fresh((index) =>
        Effect.gen(function*() {
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("headphones")))), ["a1", "a2", "a5"])
          assert.deepStrictEqual(ids(yield* run(index, query("wireless headphones"))), ["a1"])
          assert.deepStrictEqual(ids(yield* run(index, query("wireless headphones", {}, "t2"))), ["b1"])
          assert.deepStrictEqual(ids(yield* run(index, query("wireless toaster"))), [])
          const all = yield* run(index, query(""))
          assert.deepStrictEqual(sorted(ids(all)), ["a1", "a2", "a3", "a4", "a5", "a6"])
          assert.strictEqual(all.found, 6)
        })
      ))

    it.live("folds case and diacritics, searches list fields", () =>
      fresh((index) =>
        Effect.gen(function*() {
          assert.deepStrictEqual(ids(yield* run(index, query("CAFE CREME"))), ["a6"])
          assert.deepStrictEqual(ids(yield* run(index, query("brulee"))), ["a6"])
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("studio")))), ["a2"])
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("kitchen")))), ["a6"])
        })
      ))

    it.live("typo tolerance: fuzziness 0 is exact, 1 and 2 allow that many edits, auto grows with length", () =>
      fresh((index) =>
        Effect.gen(function*() {
          assert.deepStrictEqual(ids(yield* run(index, query("speakr"))), [])
          assert.deepStrictEqual(ids(yield* run(index, query("speakr", { fuzziness: 1 }))), ["a3"])
          assert.deepStrictEqual(ids(yield* run(index, query("headphnes wireles", { fuzziness: 1 }))), ["a1"])
          if (options.typoSemantics === "engine") return
          assert.deepStrictEqual(ids(yield* run(index, query("speekr", { fuzziness: 1 }))), [])
          assert.deepStrictEqual(ids(yield* run(index, query("speekr", { fuzziness: 2 }))), ["a3"])
          // auto: "speekr" (6 letters) allows 2 edits; "cse" (3 letters) allows 1; "ca" (2) none.
          assert.deepStrictEqual(ids(yield* run(index, query("speekr", { fuzziness: "auto" }))), ["a3"])
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("cse", { fuzziness: "auto" })))), ["a4"])
          assert.deepStrictEqual(ids(yield* run(index, query("slimm", { fuzziness: 0 }))), [])
          assert.deepStrictEqual(ids(yield* run(index, query("slimm", { fuzziness: "auto" }))), ["a4"])
        })
      ))

    it.live("an explicit fuzziness is the maximum edit distance whatever the term's length; auto keeps short terms exact", () =>
      fresh((index) =>
        Effect.gen(function*() {
          if (options.typoSemantics === "engine") return
          const backend = yield* SearchBackend
          yield* backend.upsert(index, [
            { id: "f1", tenantId: "t1", title: "x1" },
            { id: "f2", tenantId: "t1", title: "y" },
            { id: "f3", tenantId: "t1", title: "xyz" },
            { id: "f4", tenantId: "t1", title: "ab" },
            { id: "f5", tenantId: "t1", title: "abcd" }
          ])
          // "x": "x1" is one insertion, "y" and the "1" of a5's title one substitution; "ab" and "xyz" two edits.
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("x", { fuzziness: 0 })))), [])
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("x", { fuzziness: 1 })))), ["a5", "f1", "f2"])
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("x", { fuzziness: 2 })))), ["a5", "f1", "f2", "f3", "f4"])
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("x", { fuzziness: "auto" })))), [])
          // Two letters: "ab" exact; "abcd" two insertions, "ear" (a1) an insertion and a substitution.
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("ab", { fuzziness: 1 })))), ["f4"])
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("ab", { fuzziness: 2 })))), ["a1", "a5", "f1", "f2", "f4", "f5"])
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("ab", { fuzziness: "auto" })))), ["f4"])
        })
      ))

    it.live("exact matches rank above typo matches", () =>
      fresh((index) =>
        Effect.gen(function*() {
          const result = yield* run(index, query("case", { fuzziness: 1 }))
          assert.strictEqual(ids(result)[0], "a4")
        })
      ))

    it.live("filters: every operator on strings, numbers and ISO dates, lists, missing fields", () =>
      fresh((index) =>
        Effect.gen(function*() {
          const f = (filters: ReadonlyArray<Filter>) => Effect.map(run(index, query("", { filters })), (r) => sorted(ids(r)))
          assert.deepStrictEqual(yield* f([{ field: "brand", op: "eq", value: "Sonic" }]), ["a1", "a2"])
          assert.deepStrictEqual(yield* f([{ field: "brand", op: "eq", value: "sonic" }]), [])
          assert.deepStrictEqual(yield* f([{ field: "brand", op: "neq", value: "Sonic" }]), ["a3", "a4", "a5", "a6"])
          assert.deepStrictEqual(yield* f([{ field: "brand", op: "in", value: ["Boom", "Shell"] }]), ["a3", "a4"])
          assert.deepStrictEqual(yield* f([{ field: "brand", op: "nin", value: ["Boom", "Shell"] }]), ["a1", "a2", "a5", "a6"])
          assert.deepStrictEqual(yield* f([{ field: "price", op: "gt", value: 89 }]), ["a1", "a6"])
          assert.deepStrictEqual(yield* f([{ field: "price", op: "gte", value: 89 }]), ["a1", "a2", "a6"])
          assert.deepStrictEqual(yield* f([{ field: "price", op: "lt", value: 59.5 }]), ["a4", "a5"])
          assert.deepStrictEqual(yield* f([{ field: "price", op: "lte", value: 59.5 }]), ["a3", "a4", "a5"])
          assert.deepStrictEqual(yield* f([{ field: "price", op: "eq", value: 15 }]), ["a4"])
          assert.deepStrictEqual(yield* f([{ field: "price", op: "in", value: [15, 1] }]), ["a4", "a5"])
          assert.deepStrictEqual(yield* f([{ field: "published", op: "gte", value: "2024-01-01" }]), ["a1", "a3", "a6"])
          assert.deepStrictEqual(yield* f([{ field: "published", op: "lt", value: "2024-01-01T00:00:00Z" }]), ["a2", "a4", "a5"])
          assert.deepStrictEqual(yield* f([{ field: "published", op: "gt", value: "2024-03-01T11:00:00+02:00" }]), ["a1", "a3"])
          assert.deepStrictEqual(yield* f([{ field: "inStock", op: "eq", value: false }]), ["a2", "a6"])
          assert.deepStrictEqual(yield* f([{ field: "tags", op: "eq", value: "audio" }]), ["a1", "a2", "a3"])
          assert.deepStrictEqual(yield* f([{ field: "tags", op: "in", value: ["studio", "kitchen"] }]), ["a2", "a6"])
          assert.deepStrictEqual(yield* f([{ field: "tags", op: "nin", value: ["audio"] }]), ["a4", "a5", "a6"])
          assert.deepStrictEqual(yield* f([{ field: "missing", op: "neq", value: "x" }]), ["a1", "a2", "a3", "a4", "a5", "a6"])
          assert.deepStrictEqual(yield* f([{ field: "missing", op: "eq", value: "x" }]), [])
          assert.deepStrictEqual(yield* f([
            { field: "brand", op: "eq", value: "Sonic" },
            { field: "price", op: "lt", value: 100 }
          ]), ["a2"])
        })
      ))

    it.live("facets count the whole matched set before paging", () =>
      fresh((index) =>
        Effect.gen(function*() {
          const result = yield* run(index, query("", { facets: ["brand", "tags", "inStock"], limit: 1 }))
          assert.strictEqual(result.hits.length, 1)
          assert.deepStrictEqual(result.facets["brand"], { Sonic: 2, Boom: 1, Shell: 1, "Evil & Co": 1, Bean: 1 })
          assert.deepStrictEqual(result.facets["tags"], { audio: 3, travel: 1, studio: 1, accessories: 1, kitchen: 1 })
          assert.deepStrictEqual(result.facets["inStock"], { true: 4, false: 2 })
          const narrowed = yield* run(index, query("headphones", { facets: ["brand"] }))
          assert.deepStrictEqual(narrowed.facets["brand"], { Sonic: 2, "Evil & Co": 1 })
        })
      ))

    it.live("facet values named like Object.prototype members (a user's tag \"constructor\") count like any other", () =>
      fresh((index) =>
        Effect.gen(function*() {
          const backend = yield* SearchBackend
          yield* backend.upsert(index, [
            { id: "p1", tenantId: "t3", title: "one", body: "x", tags: ["constructor", "__proto__", "toString"], brand: "hasOwnProperty", price: 1, published: "2024-01-01", inStock: true },
            { id: "p2", tenantId: "t3", title: "two", body: "x", tags: ["constructor", "valueOf"], brand: "__proto__", price: 2, published: "2024-01-01", inStock: true }
          ])
          const result = yield* run(index, query("", { facets: ["tags", "brand"] }, "t3"))
          const own = (counts: Readonly<Record<string, number>> | undefined) =>
            Object.entries(counts ?? {}).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
          assert.deepStrictEqual(own(result.facets["tags"]), [["__proto__", 1], ["constructor", 2], ["toString", 1], ["valueOf", 1]])
          assert.deepStrictEqual(own(result.facets["brand"]), [["__proto__", 1], ["hasOwnProperty", 1]])
          for (const counts of Object.values(result.facets)) {
            for (const n of Object.values(counts)) assert.strictEqual(typeof n, "number")
          }
        })
      ))

    it.live("paging: limit and offset over a stable order", () =>
      fresh((index) =>
        Effect.gen(function*() {
          const all = ids(yield* run(index, query("")))
          assert.deepStrictEqual(all, ["a1", "a2", "a3", "a4", "a5", "a6"])
          const page = yield* run(index, query("", { limit: 2, offset: 2 }))
          assert.deepStrictEqual(ids(page), ["a3", "a4"])
          assert.strictEqual(page.found, 6)
          assert.deepStrictEqual(ids(yield* run(index, query("", { offset: 10 }))), [])
        })
      ))

    it.live("highlights: the caller's tags around matched words, the rest HTML-escaped", () =>
      fresh((index) =>
        Effect.gen(function*() {
          const result = yield* run(index, query("headphones", {
            filters: [{ field: "brand", op: "eq", value: "Evil & Co" }],
            highlight: { fields: ["title", "body"], preTag: "<em>", postTag: "</em>" }
          }))
          assert.deepStrictEqual(ids(result), ["a5"])
          const title = result.hits[0]!.highlights?.["title"]
          assert.strictEqual(title, "&lt;script&gt;alert(1)&lt;/script&gt; <em>headphones</em> &amp; more")
          assert.isUndefined(result.hits[0]!.highlights?.["body"])
          const typo = yield* run(index, query("wireles", { fuzziness: 1, highlight: { fields: ["title"], preTag: "[", postTag: "]" } }))
          assert.strictEqual(typo.hits[0]!.highlights?.["title"], "[Wireless] headphones")
          const plain = yield* run(index, query("wireless"))
          assert.isUndefined(plain.hits[0]!.highlights)
        })
      ))

    it.live("upsert replaces, remove is idempotent, documents lists the live index", () =>
      fresh((index) =>
        Effect.gen(function*() {
          const backend = yield* SearchBackend
          yield* backend.upsert(index, [{ ...documents[2]!, title: "Bluetooth boombox", body: "loud" }])
          assert.deepStrictEqual(ids(yield* run(index, query("speaker"))), [])
          assert.deepStrictEqual(ids(yield* run(index, query("boombox"))), ["a3"])
          yield* backend.remove(index, ["a3", "nope"])
          yield* backend.remove(index, ["a3"])
          assert.deepStrictEqual(ids(yield* run(index, query("boombox"))), [])
          if (backend.documents) {
            const docs = Chunk.toReadonlyArray(yield* Stream.runCollect(backend.documents(index)))
            assert.deepStrictEqual(sorted(docs.map((doc) => doc.id)), ["a1", "a2", "a4", "a5", "a6", "b1", "b2"])
            assert.deepStrictEqual(docs.find((doc) => doc.id === "a1"), documents[0])
          }
        })
      ))

    it.live("rebuild builds a fresh index and swaps it in: no orphans, the old index answers until the swap", () =>
      fresh((index) =>
        Effect.gen(function*() {
          const backend = yield* SearchBackend
          if (!backend.rebuild) return
          yield* Effect.scoped(Effect.gen(function*() {
            const rebuild = yield* backend.rebuild!(spec(index))
            yield* rebuild.upsert([{ ...documents[0]!, title: "Rebuilt headphones" }, documents[1]!])
            assert.deepStrictEqual(sorted(ids(yield* run(index, query("headphones")))), ["a1", "a2", "a5"])
            yield* rebuild.swap
          }))
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("")))), ["a1", "a2"])
          assert.deepStrictEqual(ids(yield* run(index, query("rebuilt"))), ["a1"])
          // The live index takes writes after the swap.
          yield* backend.upsert(index, [documents[2]!])
          assert.deepStrictEqual(ids(yield* run(index, query("speaker"))), ["a3"])
          yield* Effect.scoped(Effect.gen(function*() {
            const rebuild = yield* backend.rebuild!(spec(index))
            yield* rebuild.upsert([documents[3]!])
            yield* rebuild.abort
          }))
          assert.deepStrictEqual(sorted(ids(yield* run(index, query("")))), ["a1", "a2", "a3"])
        })
      ))

    it.live("ids and values with quotes, backslashes and unicode survive", () =>
      fresh((index) =>
        Effect.gen(function*() {
          const backend = yield* SearchBackend
          const odd: Document = { id: "x/\"y'\\z é", tenantId: "t1", title: "Oddball zebra", brand: "A \"quoted\" \\ brand", price: 3 }
          yield* backend.upsert(index, [odd])
          const found = yield* run(index, query("zebra", { filters: [{ field: "brand", op: "eq", value: "A \"quoted\" \\ brand" }] }))
          assert.deepStrictEqual(ids(found), [odd.id])
          assert.deepStrictEqual(found.hits[0]!.doc, odd)
          yield* backend.remove(index, [odd.id])
          assert.deepStrictEqual(ids(yield* run(index, query("zebra"))), [])
        })
      ))
  })
