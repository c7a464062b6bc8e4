/**
 * Index bootstrap and lifecycle on the engines: the schema/settings derived from the index spec,
 * idempotent `ensureIndex`, a rebuild abandoned by its scope leaves nothing behind, typo
 * parameters per engine, and the outbound hosts the plugin turns into permissions.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as EngineA from "../../../src/search/EngineA.js"
import * as EngineB from "../../../src/search/EngineB.js"
import * as EngineC from "../../../src/search/EngineC.js"
import type { IndexSpec } from "../../../src/search/SearchBackend.js"
import { freshIndex, useFakes } from "./harness.js"

const { cases, fakes } = useFakes()

const spec = (index: string): IndexSpec => ({
  index,
  tenantField: "tenantId",
  searchableFields: ["title", "tags"],
  queryableFields: ["brand", "price", "published", "inStock"],
  fields: { tenantId: "string", title: "string", tags: "string[]", brand: "string", price: "number", published: "date", inStock: "boolean" }
})

describe("index bootstrap", () => {
  it.live("engineA: an alias to a typed collection; facets on queryable fields; a date shadow; ensureIndex is idempotent", () =>
    Effect.gen(function*() {
      const backend = cases[0]!.make()
      const index = freshIndex("boot_a")
      yield* backend.ensureIndex!(spec(index))
      yield* backend.ensureIndex!(spec(index))
      const target = fakes.typesense.aliases.get(index)!
      assert.isDefined(target)
      assert.strictEqual([...fakes.typesense.collections.keys()].filter((k) => k.startsWith(`${index}__`)).length, 1)
      const fields = Object.fromEntries(fakes.typesense.collections.get(target)!.fields.map((f) => [f.name, f]))
      assert.deepInclude(fields["brand"], { type: "string", facet: true, optional: true })
      assert.deepInclude(fields["price"], { type: "float", facet: true })
      assert.deepInclude(fields["inStock"], { type: "bool", facet: true })
      assert.deepInclude(fields["tags"], { type: "string[]" })
      assert.deepInclude(fields["tenantId"], { type: "string", facet: false })
      assert.deepInclude(fields["__fw_ts_published"], { type: "int64" })
      assert.deepInclude(fields["__fw_sort"], { type: "string", sort: true })
    }))

  it.live("engineB: filterable shadows, searchable fields, sortable id, typo settings", () =>
    Effect.gen(function*() {
      const backend = cases[1]!.make()
      const index = freshIndex("boot_b")
      yield* backend.ensureIndex!(spec(index))
      yield* backend.ensureIndex!(spec(index))
      const settings = fakes.meilisearch.indexes.get(index)!.settings
      assert.deepStrictEqual(settings.searchableAttributes, ["title", "tags"])
      assert.includeMembers(settings.filterableAttributes, ["__fw_eq_tenantId", "__fw_eq_brand", "__fw_ts_published", "price"])
      assert.deepStrictEqual(settings.sortableAttributes, ["id"])
      assert.deepStrictEqual(settings.typoTolerance.minWordSizeForTypos, { oneTypo: 3, twoTypos: 6 })
      assert.strictEqual(fakes.meilisearch.indexes.get(index)!.primaryKey, EngineB.PRIMARY_KEY)
    }))

  it.live("engineC: the tenant shadow is filterOnly, facets on the others, ties by id", () =>
    Effect.gen(function*() {
      const backend = cases[2]!.make()
      const index = freshIndex("boot_c")
      yield* backend.ensureIndex!(spec(index))
      const settings = fakes.algolia.indexes.get(index)!.settings
      assert.deepStrictEqual(settings["attributesForFaceting"], ["filterOnly(__fw_eq_tenantId)", "__fw_eq_brand", "__fw_eq_price", "__fw_eq_published", "__fw_eq_inStock"])
      assert.deepStrictEqual(settings["searchableAttributes"], ["title", "tags"])
      assert.deepStrictEqual(settings["customRanking"], ["asc(id)"])
    }))

  for (const engine of cases) {
    it.live(`${engine.name}: a rebuild abandoned by its scope leaves the live index and no leftover`, () =>
      Effect.gen(function*() {
        const backend = engine.make()
        const index = freshIndex(`boot_r_${engine.name}`)
        yield* backend.ensureIndex!(spec(index))
        yield* backend.upsert(index, [{ id: "1", tenantId: "t", title: "kept" }])
        yield* Effect.scoped(Effect.gen(function*() {
          const rebuild = yield* backend.rebuild!(spec(index))
          yield* rebuild.upsert([{ id: "2", tenantId: "t", title: "new" }])
        }))
        const names = engine.name === "engineA" ? [...fakes.typesense.collections.keys()] : engine.name === "engineB" ? [...fakes.meilisearch.indexes.keys()] : [...fakes.algolia.indexes.keys()]
        assert.deepStrictEqual(names.filter((n) => n.startsWith(index) && n !== index && n !== fakes.typesense.aliases.get(index)), [])
        const result = yield* backend.query(index, { q: "", limit: 10, offset: 0, fuzziness: 0, facets: [], engineParams: {}, filters: [{ field: "tenantId", op: "eq", value: "t" }] })
        assert.deepStrictEqual(result.hits.map((h) => h.doc.id), ["1"])
      }))
  }
})

describe("typo parameters", () => {
  it("engineA: exact edit budgets for numbers, length-graded for auto", () => {
    assert.deepStrictEqual(EngineA.typoParams(0), { num_typos: 0, min_len_1typo: 1, min_len_2typo: 1 })
    assert.deepStrictEqual(EngineA.typoParams(2), { num_typos: 2, min_len_1typo: 1, min_len_2typo: 1 })
    assert.deepStrictEqual(EngineA.typoParams("auto"), { num_typos: 2, min_len_1typo: 3, min_len_2typo: 6 })
  })
  it("engineB: fuzziness 0 quotes each word, other values keep the engine's tolerance", () => {
    assert.strictEqual(EngineB.queryText("wireless \"head phones", 0), "\"wireless\" \"head\" \"phones\"")
    assert.strictEqual(EngineB.queryText("wireless head", 1), "wireless head")
  })
  it("engineC: 0 turns typos off; 1 never allows two", () => {
    assert.deepStrictEqual(EngineC.typoParams(0), { typoTolerance: false })
    assert.strictEqual(EngineC.typoParams(1)["minWordSizefor2Typos"], 255)
  })
})

describe("outbound hosts (network:outbound:<host>)", () => {
  it("come from the backend's configuration", () => {
    assert.deepStrictEqual(EngineA.make({ url: "https://ts.example.com:8108", apiKey: "k" }).outboundHosts, ["ts.example.com"])
    assert.strictEqual(EngineA.outboundHost({ url: "https://ts.example.com:8108", apiKey: "k" }), "ts.example.com")
    assert.deepStrictEqual(EngineB.make({ url: "https://ms.example.com", apiKey: "k" }).outboundHosts, ["ms.example.com"])
    assert.deepStrictEqual(EngineC.make({ appId: "ABC", apiKey: "k" }).outboundHosts, [
      "ABC.algolia.net", "ABC-dsn.algolia.net", "ABC-1.algolianet.com", "ABC-2.algolianet.com", "ABC-3.algolianet.com"
    ])
    assert.deepStrictEqual(EngineC.make({ appId: "ABC", apiKey: "k", hosts: ["https://proxy.example.com:8443"] }).outboundHosts, ["proxy.example.com"])
  })
})
