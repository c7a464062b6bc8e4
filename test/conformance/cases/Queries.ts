/**
 * Conformance: filters, ordering, paging, counting, the keyset walk and batched inserts.
 */
import type { Vitest } from "@effect/vitest"
import { assert } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import * as Store from "../../../src/kernel/store/Store.js"
import type { Services } from "../fixtures.js"
import { Events, freshTenant, item, Items } from "../fixtures.js"

export const queries = (it: Vitest.MethodsNonLive<Services>) => {
  it.effect("every filter operator, on text, numbers, booleans and optional values", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      yield* store.insertMany(Items, [
        item(t, "d", 4),
        item(t, "a", 1, { note: "x" }),
        item(t, "c", 3, { meta: { color: "blue" } }),
        item(t, "b", 2, { note: "y" }),
        item(t, "e", 2)
      ])
      const names = (where: Store.Where<typeof Items>) =>
        Effect.map(
          store.find(Items, { orderBy: "name", where: { tenantId: t, ...where } }),
          (rows) => rows.map((r) => r.name).join("")
        )
      assert.strictEqual(yield* names({}), "abcde")
      assert.strictEqual(yield* names({ price: 2 }), "be")
      assert.strictEqual(yield* names({ price: { eq: 2 } }), "be")
      assert.strictEqual(yield* names({ price: { neq: 2 } }), "acd")
      assert.strictEqual(yield* names({ price: { gt: 2 } }), "cd")
      assert.strictEqual(yield* names({ price: { gte: 3 } }), "cd")
      assert.strictEqual(yield* names({ price: { lt: 2 } }), "a")
      assert.strictEqual(yield* names({ price: { lte: 2 } }), "abe")
      assert.strictEqual(yield* names({ price: { gt: 1, lt: 4 } }), "bce")
      assert.strictEqual(yield* names({ name: { in: ["a", "c", "zz"] } }), "ac")
      assert.strictEqual(yield* names({ name: { nin: ["a", "c"] } }), "bde")
      assert.strictEqual(yield* names({ name: { in: [] } }), "")
      assert.strictEqual(yield* names({ name: { nin: [] } }), "abcde")
      assert.strictEqual(yield* names({ name: { gte: "b", lt: "d" } }), "bc")
      assert.strictEqual(yield* names({ active: true }), "bde")
      assert.strictEqual(yield* names({ active: { neq: true } }), "ac")
      // An absent or null value never satisfies a comparison, except `eq null` / `neq null`.
      assert.strictEqual(yield* names({ note: "y" }), "b")
      assert.strictEqual(yield* names({ note: { neq: "y" } }), "a")
      assert.strictEqual(yield* names({ note: { nin: ["y"] } }), "a")
      assert.strictEqual(yield* names({ note: { eq: null } as never }), "cde")
      assert.strictEqual(yield* names({ note: { neq: null } as never }), "ab")
      assert.strictEqual(yield* names({ meta: null }), "abde")
      assert.strictEqual(yield* names({ meta: { neq: null } }), "c")
      assert.strictEqual(yield* names({ meta: { color: "blue" } }), "c")
      assert.strictEqual(yield* names({ price: 2, active: true, name: { neq: "b" } }), "e")
    }))

  it.effect("filters compare encoded values: dates are compared as instants", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const kind = freshTenant()
      const day = (d: number) => new Date(Date.UTC(2030, 0, d))
      yield* store.insertMany(Events, [1, 2, 3, 4].map((d) => ({ kind, n: d, at: day(d) })))
      const later = yield* store.find(Events, { where: { kind, at: { gt: day(2) } }, orderBy: "at", direction: "desc" })
      assert.deepStrictEqual(later.map((e) => e.n), [4, 3])
      assert.deepStrictEqual((yield* store.find(Events, { where: { kind, at: { in: [day(1), day(4)] } } })).map((e) => e.n).sort(), [1, 4])
    }))

  it.effect("ordering asc and desc (ties by id), limit and offset paging, count", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      yield* store.insertMany(Items, [
        { ...item(t, "d", 4), id: `${t}-1` },
        { ...item(t, "a", 1), id: `${t}-2` },
        { ...item(t, "c", 2), id: `${t}-3` },
        { ...item(t, "b", 2), id: `${t}-4` },
        { ...item(t, "e", 2, { note: "n" }), id: `${t}-5` }
      ])
      const find = (options: Store.FindOptions<typeof Items>) =>
        Effect.map(store.find(Items, { ...options, where: { tenantId: t } }), (rows) => rows.map((r) => r.name).join(""))
      assert.strictEqual(yield* find({}), "dacbe")
      assert.strictEqual(yield* find({ direction: "desc" }), "ebcad")
      assert.strictEqual(yield* find({ orderBy: "price" }), "acbed")
      assert.strictEqual(yield* find({ orderBy: "price", direction: "desc" }), "dcbea")
      assert.strictEqual(yield* find({ orderBy: "name", limit: 2 }), "ab")
      assert.strictEqual(yield* find({ orderBy: "name", limit: 2, offset: 2 }), "cd")
      assert.strictEqual(yield* find({ orderBy: "name", offset: 3 }), "de")
      assert.strictEqual(yield* find({ orderBy: "name", offset: 9 }), "")
      assert.strictEqual(yield* find({ orderBy: "name", limit: 0 }), "")
      assert.strictEqual(yield* find({ orderBy: "name", limit: 2.7, offset: -3 }), "ab")
      assert.strictEqual(yield* find({ orderBy: "name", direction: "desc", limit: 1 }), "e")
      // Nulls first ascending, last descending.
      assert.strictEqual((yield* find({ orderBy: "note" })).at(-1), "e")
      assert.strictEqual((yield* find({ orderBy: "note", direction: "desc" }))[0], "e")
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t } }), 5)
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t, price: { gte: 2 } } }), 4)
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t, price: 99 } }), 0)
    }))

  it.effect("the keyset walk streams 10,000 rows in id order, a page at a time, honouring where", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      const rows = Array.from({ length: 10_000 }, (_, i) => ({ ...item(t, `n${i}`, i), id: `${t}-${String(i).padStart(5, "0")}` }))
      yield* store.insertMany(Items, [...rows].reverse())
      const ids = Chunk.toReadonlyArray(
        yield* store.walk(Items, { where: { tenantId: t } }).pipe(Stream.map((row) => row.id), Stream.runCollect)
      )
      assert.strictEqual(ids.length, 10_000)
      assert.deepStrictEqual(ids, rows.map((r) => r.id))
      const even = yield* store.walk(Items, { where: { tenantId: t, active: true }, pageSize: 333 }).pipe(Stream.runCount)
      assert.strictEqual(even, 5_000)
      const firstFew = yield* store.walk(Items, { where: { tenantId: t }, pageSize: 3 }).pipe(Stream.take(4), Stream.runCollect)
      assert.deepStrictEqual(Chunk.toReadonlyArray(firstFew).map((r) => r.name), ["n0", "n1", "n2", "n3"])
      assert.strictEqual(yield* store.walk(Items, { where: { tenantId: `${t}-none` } }).pipe(Stream.runCount), 0)
      const walkError = yield* store.walk(Items, { where: { nope: 1 } as never }).pipe(Stream.runCount, Effect.flip)
      assert.strictEqual(walkError._tag, "UnknownField")
    }))

  it.effect("insertMany is atomic: a duplicate in a later chunk writes none of the rows", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      yield* store.insert(Items, { ...item(t, "taken", 0), id: `${t}-taken` })
      const rows = Array.from({ length: 1_200 }, (_, i) => item(t, `m${i}`, i))
      const failed = yield* Effect.flip(store.insertMany(Items, [...rows, { ...item(t, "dup", 1), id: `${t}-taken` }]))
      assert.deepStrictEqual([failed._tag, failed._tag === "DuplicateRow" && failed.id], ["DuplicateRow", `${t}-taken`])
      const twice = yield* Effect.flip(store.insertMany(Items, [{ ...item(t, "x", 1), id: `${t}-x` }, { ...item(t, "x", 1), id: `${t}-x` }]))
      assert.strictEqual(twice._tag, "DuplicateRow")
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t } }), 1)
      assert.deepStrictEqual(yield* store.insertMany(Items, []), [])
      const written = yield* store.insertMany(Items, rows)
      assert.strictEqual(written.length, 1_200)
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t } }), 1_201)
    }))
}
