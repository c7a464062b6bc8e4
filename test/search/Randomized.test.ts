/**
 * A randomized comparison (fixed seed): the sql backend (SQLite FTS5, PostgreSQL) against the
 * memory backend, over random documents and random queries with every filter operator. Ranking
 * may differ; the matched sets, totals and facet counts must not.
 */
import { assert, describe, it } from "@effect/vitest"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer } from "effect"
import * as Memory from "../../src/search/Memory.js"
import type { Document, Filter, FilterOp, IndexSpec, Query, SearchBackendShape } from "../../src/search/SearchBackend.js"
import { SearchBackend } from "../../src/search/SearchBackend.js"
import * as Sql from "../../src/search/Sql.js"
import * as Pg from "../support/Pg.js"

/** mulberry32: a small seeded PRNG, so a failure replays. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const spec: IndexSpec = {
  index: "rand",
  tenantField: "tenantId",
  searchableFields: ["title", "tags"],
  fields: { tenantId: "string", title: "string", tags: "string[]", brand: "string", price: "number", published: "date", inStock: "boolean" }
}
const words = ["apple", "apply", "maple", "ample", "banana", "bandana", "cherry", "sherry", "date", "data", "elder", "older"]

const generate = (random: () => number) => {
  const pick = <A>(list: ReadonlyArray<A>): A => list[Math.floor(random() * list.length)]!
  const maybe = <A>(value: () => A): A | undefined => random() < 0.8 ? value() : undefined
  const docs: Array<Document> = []
  for (let i = 0; i < 120; i++) {
    const doc: Record<string, unknown> = {
      id: `d${i}`,
      tenantId: random() < 0.7 ? "t1" : "t2",
      title: Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(words)).join(" "),
      tags: Array.from({ length: Math.floor(random() * 3) }, () => pick(["red", "green", "blue"]))
    }
    const brand = maybe(() => pick(["acme", "globex", "initech"]))
    if (brand !== undefined) doc["brand"] = brand
    const price = maybe(() => random() < 0.5 ? Math.floor(random() * 50) : Math.round(random() * 5000) / 100)
    if (price !== undefined) doc["price"] = price
    const published = maybe(() => `2024-0${1 + Math.floor(random() * 9)}-1${Math.floor(random() * 9)}T10:00:00Z`)
    if (published !== undefined) doc["published"] = published
    const inStock = maybe(() => random() < 0.5)
    if (inStock !== undefined) doc["inStock"] = inStock
    docs.push(doc as Document)
  }
  const ops: ReadonlyArray<FilterOp> = ["eq", "neq", "gt", "gte", "lt", "lte", "in", "nin"]
  const filter = (): Filter => {
    const op = pick(ops)
    const field = pick(["brand", "price", "published", "inStock", "tags"])
    const scalar = (): string | number | boolean =>
      field === "price" ? (random() < 0.5 ? Math.floor(random() * 50) : Math.round(random() * 5000) / 100)
      : field === "published" ? `2024-0${1 + Math.floor(random() * 9)}-15`
      : field === "inStock" ? random() < 0.5
      : field === "brand" ? pick(["acme", "globex", "initech", "nobody"])
      : pick(["red", "green", "blue"])
    if (op === "in" || op === "nin") return { field, op, value: Array.from({ length: 1 + Math.floor(random() * 2) }, scalar) as ReadonlyArray<string> }
    if (op === "gt" || op === "gte" || op === "lt" || op === "lte") {
      return { field: field === "published" ? "published" : "price", op, value: field === "published" ? scalar() as string : Math.floor(random() * 50) }
    }
    return { field, op, value: scalar() }
  }
  const queries: Array<Query> = []
  for (let i = 0; i < 150; i++) {
    const terms = Math.floor(random() * 3)
    queries.push({
      q: Array.from({ length: terms }, () => pick(words)).join(" "),
      limit: 1000,
      offset: 0,
      fuzziness: pick(["auto", 0, 1] as const),
      filters: [{ field: "tenantId", op: "eq", value: random() < 0.7 ? "t1" : "t2" }, ...Array.from({ length: Math.floor(random() * 3) }, filter)],
      facets: ["brand", "tags", "inStock", "price"],
      engineParams: {}
    })
  }
  return { docs, queries }
}

const compare = (layer: () => Layer.Layer<SearchBackend>) =>
  it.effect("matched sets, totals and facet counts equal the memory backend's over 150 random queries (seed 7)", () =>
    Effect.gen(function*() {
      const { docs, queries } = generate(prng(7))
      const reference: SearchBackendShape = Memory.make()
      const backend = yield* SearchBackend
      for (const b of [reference, backend]) {
        if (b.ensureIndex !== undefined) yield* b.ensureIndex(spec)
        yield* b.upsert("rand", docs)
      }
      for (const query of queries) {
        const expected = yield* reference.query("rand", query)
        const actual = yield* backend.query("rand", query)
        const ids = (result: typeof expected) => result.hits.map((hit) => hit.doc.id).sort()
        const label = JSON.stringify(query)
        assert.deepStrictEqual(ids(actual), ids(expected), label)
        assert.strictEqual(actual.found, expected.found, label)
        assert.deepStrictEqual(actual.facets, expected.facets, label)
      }
    }).pipe(Effect.provide(layer())), 60_000)

describe("randomized: sql on SQLite against memory", () => {
  compare(() => Sql.layer.pipe(Layer.provide(SqliteClient.layer({ filename: ":memory:" })), Layer.orDie))
})
if (Pg.serverUrl !== null) {
  describe("randomized: sql on PostgreSQL against memory", () => {
    compare(() => Sql.layer.pipe(Layer.provide(Pg.layerFreshClient), Layer.orDie))
  })
}
