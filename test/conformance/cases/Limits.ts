/**
 * Conformance: what no tier can store faithfully is refused by every tier alike with `RowInvalid`
 * (non-finite numbers, NUL and unpaired surrogates in text, in rows and in `where` values; lists
 * too long for SQL parameters), and paging values past 2^53 are clamped rather than failing on SQL.
 */
import type { Vitest } from "@effect/vitest"
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import * as Store from "../../../src/kernel/Store.js"
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

  it.effect("paging values past 2^53 are clamped, not an error", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      yield* store.insert(Items, item(t, "a", 1))
      assert.strictEqual((yield* store.find(Items, { where: { tenantId: t }, limit: 1e21 })).length, 1)
      assert.strictEqual((yield* store.find(Items, { where: { tenantId: t }, offset: 2 ** 63 })).length, 0)
    }))
}
