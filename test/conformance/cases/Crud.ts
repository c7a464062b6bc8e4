/**
 * Conformance: writes, reads and the typed errors of single rows.
 */
import type { Vitest } from "@effect/vitest"
import { assert } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Store from "../../../src/kernel/store/Store.js"
import type { Services } from "../fixtures.js"
import { Events, freshTenant, item, Items, LooseLabels, StrictLabels } from "../fixtures.js"

export const crud = (it: Vitest.MethodsNonLive<Services>) => {
  it.effect("insert, get, update, upsert, delete", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      const inserted = yield* store.insert(Items, item(t, "apple", 3, { note: "fresh", meta: { color: "red" } }))
      assert.match(inserted.id, /^[0-9a-f-]{36}$/)
      assert.deepStrictEqual(Option.getOrThrow(yield* store.get(Items, inserted.id)), inserted)
      const updated = yield* store.update(Items, inserted.id, { price: 4, tags: ["a", "b"] })
      assert.deepStrictEqual(
        [updated.price, updated.tags, updated.note, updated.meta, updated.name],
        [4, ["a", "b"], "fresh", { color: "red" }, "apple"]
      )
      assert.deepStrictEqual(Option.getOrThrow(yield* store.get(Items, inserted.id)), updated)
      const replaced = yield* store.upsert(Items, { ...item(t, "apple", 5), id: inserted.id })
      assert.isFalse("note" in replaced)
      assert.deepStrictEqual(Option.getOrThrow(yield* store.get(Items, inserted.id)), replaced)
      const created = yield* store.upsert(Items, { ...item(t, "pear", 1), id: `${t}-pear` })
      assert.strictEqual(created.id, `${t}-pear`)
      assert.strictEqual(Option.getOrThrow(yield* store.get(Items, `${t}-pear`)).name, "pear")
      yield* store.delete(Items, inserted.id)
      assert.isTrue(Option.isNone(yield* store.get(Items, inserted.id)))
      assert.isTrue(Option.isNone(yield* store.get(Items, "never-there")))
    }))

  it.effect("values round-trip identically: text, numbers, booleans, JSON, optional and nullable, dates", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      const odd = item(t, `quote ' "double" ünïcödé 🎉`, -12.625, {
        active: true,
        tags: [],
        meta: { color: "" },
        note: ""
      })
      const row = yield* store.insert(Items, odd)
      assert.deepStrictEqual(Option.getOrThrow(yield* store.get(Items, row.id)), { ...odd, id: row.id })
      const cleared = yield* store.update(Items, row.id, { note: undefined, meta: null, active: false })
      assert.deepStrictEqual(Option.getOrThrow(yield* store.get(Items, row.id)), cleared)
      assert.isFalse("note" in cleared)
      assert.strictEqual(cleared.meta, null)
      const at = new Date("2031-02-03T04:05:06.789Z")
      const event = yield* store.insert(Events, { kind: "dated", n: 2 ** 40 + 0.5, at })
      const read = Option.getOrThrow(yield* store.get(Events, event.id))
      assert.instanceOf(read.at, Date)
      assert.strictEqual(read.at?.toISOString(), at.toISOString())
      assert.strictEqual(read.n, 2 ** 40 + 0.5)
    }))

  it.effect("typed errors: RowNotFound, DuplicateRow, RowInvalid, UnknownField; failed calls write nothing", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      const row = yield* store.insert(Items, item(t, "a", 1))
      const notFound = yield* Effect.flip(store.update(Items, "missing", { price: 1 }))
      assert.deepStrictEqual([notFound._tag, notFound._tag === "RowNotFound" && notFound.id], ["RowNotFound", "missing"])
      assert.strictEqual((yield* Effect.flip(store.delete(Items, "missing")))._tag, "RowNotFound")
      const duplicate = yield* Effect.flip(store.insert(Items, { ...item(t, "b", 2), id: row.id }))
      assert.deepStrictEqual([duplicate._tag, duplicate._tag === "DuplicateRow" && duplicate.id], ["DuplicateRow", row.id])
      const invalid = yield* Effect.flip(store.insert(Items, { ...item(t, "c", 3), price: "three-secret" } as never))
      assert.strictEqual(invalid._tag, "RowInvalid")
      assert.include(invalid.message, "price")
      assert.notInclude(invalid.message, "three-secret")
      const excess = yield* Effect.flip(store.insert(Items, { ...item(t, "d", 4), colour: "red" } as never))
      assert.deepStrictEqual([excess._tag, excess.message.includes("colour")], ["RowInvalid", true])
      const badPatch = yield* Effect.flip(store.update(Items, row.id, { name: 7 } as never))
      assert.strictEqual(badPatch._tag, "RowInvalid")
      const unknown = yield* Effect.flip(store.find(Items, { where: { nope: 1 } as never }))
      assert.deepStrictEqual([unknown._tag, unknown._tag === "UnknownField" && unknown.field], ["UnknownField", "nope"])
      assert.strictEqual((yield* Effect.flip(store.find(Items, { orderBy: "nope" as never })))._tag, "UnknownField")
      assert.strictEqual((yield* Effect.flip(store.count(Items, { where: { nope: 1 } as never })))._tag, "UnknownField")
      const badWhere = yield* Effect.flip(store.find(Items, { where: { price: "cheap" as never } }))
      assert.strictEqual(badWhere._tag, "RowInvalid")
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t } }), 1)
      assert.strictEqual(Option.getOrThrow(yield* store.get(Items, row.id)).price, 1)
    }))

  it.effect("a stored row that no longer satisfies the declaration reads as RowInvalid", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const short = yield* store.insert(LooseLabels, { text: "ab" })
      const long = yield* store.insert(LooseLabels, { text: "abcdef" })
      assert.strictEqual(Option.getOrThrow(yield* store.get(StrictLabels, long.id)).text, "abcdef")
      const invalid = yield* Effect.flip(store.get(StrictLabels, short.id))
      assert.strictEqual(invalid._tag, "RowInvalid")
      assert.notInclude(invalid.message, `"ab"`)
      assert.strictEqual((yield* Effect.flip(store.find(StrictLabels, { where: { id: short.id } })))._tag, "RowInvalid")
      yield* store.delete(LooseLabels, short.id)
    }))
}
