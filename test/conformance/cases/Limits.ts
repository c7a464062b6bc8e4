/**
 * Conformance: what no tier can store faithfully is refused by every tier alike with `RowInvalid`
 * (non-finite numbers, NUL and unpaired surrogates in text, in rows and in `where` values; lists
 * too long for SQL parameters), and paging values past 2^53 are clamped rather than failing on SQL.
 */
import type { Vitest } from "@effect/vitest"
import { assert } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Store from "../../../src/kernel/store/Store.js"
import type { Services } from "../fixtures.js"
import { freshTenant, item, Items } from "../fixtures.js"

export const limits = (it: Vitest.MethodsNonLive<Services>) => {
  it.effect("unstorable values are RowInvalid on every tier, and nothing is written", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      const refused = [
        item(t, "inf", Number.POSITIVE_INFINITY),
        item(t, "nan", Number.NaN),
        item(t, "nul\u0000", 1),
        item(t, "lone\ud800", 1),
        item(t, "json", 1, { meta: { color: "\u0000" } })
      ]
      for (const row of refused) {
        const failure = yield* Effect.flip(store.insert(Items, row))
        assert.strictEqual(failure._tag, "RowInvalid", JSON.stringify(failure))
      }
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t } }), 0)
      const written = yield* store.insert(Items, item(t, "ok \ud83d\ude00", 1))
      assert.strictEqual(written.name, "ok \ud83d\ude00")
      for (const where of [{ price: Number.NaN }, { name: "x\u0000" }, { price: { in: Array.from({ length: 10_001 }, (_, i) => i) } }]) {
        const failure = yield* Effect.flip(store.find(Items, { where }))
        assert.strictEqual(failure._tag, "RowInvalid", JSON.stringify(where).slice(0, 80))
      }
    }))

  it.effect("an id no row can have is simply not found on every tier: get, update, delete; insert refuses it", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      yield* store.insert(Items, item(t, "present", 1))
      for (const id of ["nul\u0000", "lone\ud800", "\udc00", "x".repeat(1_000_000)]) {
        const label = JSON.stringify(id.slice(0, 12))
        assert.isTrue(Option.isNone(yield* store.get(Items, id)), label)
        assert.strictEqual((yield* Effect.flip(store.update(Items, id, { price: 2 })))._tag, "RowNotFound", label)
        assert.strictEqual((yield* Effect.flip(store.delete(Items, id)))._tag, "RowNotFound", label)
        assert.strictEqual((yield* Effect.flip(store.insert(Items, { ...item(t, "hostile", 1), id })))._tag, "RowInvalid", label)
        assert.strictEqual((yield* Effect.flip(store.upsert(Items, { ...item(t, "hostile", 1), id })))._tag, "RowInvalid", label)
      }
      assert.deepStrictEqual(yield* store.find(Items, { where: { id: "x".repeat(1_000_000) } }), [])
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t } }), 1)
    }))

  it.effect("paging values past 2^53 are clamped, not an error", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      yield* store.insert(Items, item(t, "a", 1))
      assert.strictEqual((yield* store.find(Items, { where: { tenantId: t }, limit: 1e21 })).length, 1)
      assert.strictEqual((yield* store.find(Items, { where: { tenantId: t }, offset: 2 ** 63 })).length, 0)
    }))
}
