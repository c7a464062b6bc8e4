/**
 * Escaping and injection: a filter value can neither widen a query nor escape the tenant filter,
 * on any engine; engineParams that select documents never reach the engine; engineA refuses a
 * value it cannot escape (a backtick).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as EngineA from "../../../src/search/EngineA.js"
import * as EngineB from "../../../src/search/EngineB.js"
import * as EngineC from "../../../src/search/EngineC.js"
import type { Document, Filter, IndexSpec, Query } from "../../../src/search/SearchBackend.js"
import { capture } from "../../support/Serve.js"
import { freshIndex, useFakes } from "./harness.js"

const { cases, fakes } = useFakes()

const spec = (index: string): IndexSpec => ({
  index,
  tenantField: "tenantId",
  searchableFields: ["title"],
  fields: { tenantId: "string", title: "string", brand: "string", price: "number" }
})

const docs: ReadonlyArray<Document> = [
  { id: "mine", tenantId: "t1", title: "secret plans", brand: "Acme", price: 1 },
  { id: "theirs", tenantId: "t2", title: "secret plans", brand: "Acme", price: 1 },
  { id: "upper", tenantId: "T1", title: "secret plans", brand: "Acme", price: 1 },
  { id: "numeric", tenantId: "1", title: "secret plans", brand: "Acme", price: 1 }
]

const q = (tenant: string, filters: ReadonlyArray<Filter> = [], engineParams: Record<string, unknown> = {}): Query => ({
  q: "secret",
  limit: 50,
  offset: 0,
  fuzziness: 0,
  facets: [],
  engineParams,
  filters: [{ field: "tenantId", op: "eq", value: tenant }, ...filters]
})

/** Values that try to break out of a quoted literal in one engine syntax or another. */
const hostile = [
  `Acme" OR tenantId = "t2`,
  `Acme") OR ("tenantId" = "t2`,
  `Acme\\" OR tenantId = \\"t2`,
  `Acme\\`,
  `Acme" OR "__fw_eq_tenantId" = "s7432`,
  `Acme || tenantId:=t2`,
  `Acme) || (tenantId:=t2`,
  `Acme:" OR tenantId:"t2`,
  `Acme" OR NOT tenantId:"x`,
  `*`,
  ``,
  `Acme\nOR tenantId = t2`,
  `AND`,
  `NOT IN [t2]`
]

for (const engine of cases) {
  describe(`${engine.name}: a filter value cannot widen a query or escape the tenant filter`, () => {
    const ready = Effect.gen(function*() {
      const backend = engine.make()
      const index = freshIndex(`inj_${engine.name}`)
      yield* backend.ensureIndex!(spec(index))
      yield* backend.upsert(index, docs)
      return { backend, index }
    })

    it.live("hostile string values match nothing and never another tenant's document", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready
        for (const value of hostile) {
          // eq and nin cover both quoting paths (one literal, a list) and both polarities.
          for (const op of ["eq", "nin"] as const) {
            const filter: Filter = { field: "brand", op, value: op === "nin" ? [value, "zzz"] : value }
            const result = yield* backend.query(index, q("t1", [filter]))
            const ids = result.hits.map((h) => h.doc.id)
            assert.isTrue(ids.every((id) => id === "mine"), `${engine.name} ${op} ${JSON.stringify(value)} returned ${ids}`)
            // eq/in of a value no document has match nothing; neq/nin keep the caller's own document.
            assert.deepStrictEqual(ids, op === "nin" ? ["mine"] : [], `${op} ${JSON.stringify(value)}`)
          }
        }
      }))

    it.live("tenant ids compare exactly: case and type never merge tenants", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready
        assert.deepStrictEqual((yield* backend.query(index, q("t1"))).hits.map((h) => h.doc.id), ["mine"])
        assert.deepStrictEqual((yield* backend.query(index, q("T1"))).hits.map((h) => h.doc.id), ["upper"])
        assert.deepStrictEqual((yield* backend.query(index, q("1"))).hits.map((h) => h.doc.id), ["numeric"])
        // A hostile tenant value (the plugin passes the caller's tenant id) stays one literal.
        for (const value of hostile) {
          const ids = (yield* backend.query(index, q(value))).hits.map((h) => h.doc.id)
          assert.deepStrictEqual(ids, [], JSON.stringify(value))
        }
      }))

    it.live("a second filter on the tenant field can only narrow", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready
        for (const op of ["eq", "neq", "in", "nin"] as const) {
          const value = op === "in" || op === "nin" ? ["t2", "T1"] : "t2"
          const ids = (yield* backend.query(index, q("t1", [{ field: "tenantId", op, value }]))).hits.map((h) => h.doc.id)
          assert.isTrue(ids.every((id) => id === "mine"), `${op}: ${ids}`)
        }
      }))

    it.live("document-selecting engineParams are dropped before the request", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready
        const params: Record<string, unknown> = {
          filter_by: "tenantId:=t2", query_by: "tenantId", preset: "x", pinned_hits: "theirs:1", hidden_hits: "mine",
          filter: ["tenantId = t2"], attributesToSearchOn: ["tenantId"], matchingStrategy: "last",
          filters: "tenantId:t2", facetFilters: ["tenantId:t2"], numericFilters: ["price>0"], restrictSearchableAttributes: ["tenantId"],
          enableRules: true, optionalFilters: ["tenantId:t2"], q: "x", query: "x", offset: 5, limit: 1
        }
        const before = engine.fake().requests.length
        const logs: Array<string> = []
        const result = yield* backend.query(index, q("t1", [], params)).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture(logs))))
        assert.deepStrictEqual(result.hits.map((h) => h.doc.id), ["mine"])
        // The drop is logged (once, naming the keys) for the operator: asserted here rather than printed.
        assert.strictEqual(logs.filter((line) => line.includes("engineParams dropped")).length, 1, logs.join("\n"))
        assert.include(logs.find((line) => line.includes("engineParams dropped")), "filter_by")
        const sent = engine.fake().requests.slice(before)
        const searched = sent.find((r) => r.operationId === "searchCollection" || r.operationId === "search_with_post" || r.operationId === "searchSingleIndex")!
        const keys = Object.keys({ ...searched.query, ...(searched.body as object | undefined) })
        for (const k of ["filter_by", "filters", "filter"]) {
          if (keys.includes(k)) {
            const v = JSON.stringify((searched.query as Record<string, unknown>)[k] ?? (searched.body as Record<string, unknown>)[k])
            assert.notInclude(v, "t2", `${k} carries the caller's value`)
          }
        }
        for (const k of ["preset", "pinned_hits", "hidden_hits", "attributesToSearchOn", "matchingStrategy", "facetFilters", "numericFilters", "restrictSearchableAttributes", "enableRules", "optionalFilters"]) {
          assert.notInclude(keys, k)
        }
      }))
  })
}

describe("engineA: a value Typesense cannot escape is refused", () => {
  it.live("a backtick in a filter value fails permanently, before any search request", () =>
    Effect.gen(function*() {
      const backend = cases[0]!.make()
      const index = freshIndex("inj_bt")
      yield* backend.ensureIndex!(spec(index))
      yield* backend.upsert(index, docs)
      const before = fakes.typesense.requests.length
      for (const value of ["Acme` || tenantId:=`t2", "`", "a\\`b"]) {
        const error = yield* Effect.flip(backend.query(index, q("t1", [{ field: "brand", op: "eq", value }])))
        assert.strictEqual(error.kind, "permanent")
        assert.match(error.message, /backtick/)
        const tenant = yield* Effect.flip(backend.query(index, q(value)))
        assert.strictEqual(tenant.kind, "permanent")
      }
      assert.strictEqual(fakes.typesense.requests.length, before)
    }))

  it("quoting and the compiled filter_by", () => {
    assert.strictEqual(EngineA.quoteValue("a && b || (c)"), "`a && b || (c)`")
    assert.isUndefined(EngineA.quoteValue("a`b"))
    const compiled = EngineA.compileFilters(spec("x"), [
      { field: "tenantId", op: "eq", value: "t1" },
      { field: "brand", op: "in", value: ["A", "B"] },
      { field: "price", op: "gte", value: 2 },
      { field: "brand", op: "nin", value: [1] }
    ])
    assert.deepStrictEqual(compiled, { never: false, filterBy: "tenantId:=`t1` && brand:=[`A`,`B`] && price:>=2" })
  })
})

describe("engineB/engineC quoting", () => {
  it("escapes backslashes and quotes", () => {
    assert.strictEqual(EngineB.quoteValue(`a"b\\c`), `"a\\"b\\\\c"`)
    assert.strictEqual(EngineC.quoteValue(`a"b\\c`), `"a\\"b\\\\c"`)
  })
})
