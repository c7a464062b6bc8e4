/**
 * Conformance: transactions commit and roll back, nest as savepoints, isolate uncommitted writes,
 * and keep concurrent updates of one row from losing each other's changes.
 */
import type { Vitest } from "@effect/vitest"
import { assert } from "@effect/vitest"
import { Deferred, Effect, Either, Exit, Fiber, Option } from "effect"
import * as Store from "../../../src/kernel/store/Store.js"
import type { Services } from "../fixtures.js"
import { freshTenant, item, Items } from "../fixtures.js"

export const transactions = (it: Vitest.MethodsNonLive<Services>) => {
  it.effect("a transaction commits all its writes or, failing, none", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      const kept = yield* store.transaction(Effect.gen(function*() {
        const a = yield* store.insert(Items, item(t, "kept1", 1))
        yield* store.insert(Items, item(t, "kept2", 2))
        yield* store.update(Items, a.id, { name: "kept1!" })
        return a.id
      }))
      const failed = yield* Effect.exit(store.transaction(Effect.gen(function*() {
        yield* store.insert(Items, item(t, "lost", 3))
        yield* store.update(Items, kept, { price: 100 })
        yield* store.delete(Items, kept)
        return yield* Effect.fail("abort" as const)
      })))
      assert.deepStrictEqual(failed, Exit.fail("abort" as const))
      const died = yield* Effect.exit(store.transaction(Effect.zipRight(store.insert(Items, item(t, "died", 4)), Effect.die("bug"))))
      assert.isTrue(Exit.isFailure(died))
      const rows = yield* store.find(Items, { where: { tenantId: t }, orderBy: "price" })
      assert.deepStrictEqual(rows.map((r) => [r.name, r.price]), [["kept1!", 1], ["kept2", 2]])
    }))

  it.effect("a failed nested transaction rolls back to its savepoint and keeps the outer writes", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      yield* store.transaction(Effect.gen(function*() {
        const outer = yield* store.insert(Items, item(t, "outer", 1))
        const inner = yield* Effect.either(store.transaction(Effect.gen(function*() {
          yield* store.insert(Items, item(t, "inner", 2))
          yield* store.update(Items, outer.id, { name: "changed by inner" })
          return yield* Effect.fail("inner abort" as const)
        })))
        assert.deepStrictEqual(inner, Either.left("inner abort" as const))
        assert.strictEqual(Option.getOrThrow(yield* store.get(Items, outer.id)).name, "outer")
        yield* store.transaction(store.insert(Items, item(t, "committed inner", 3)))
        yield* store.insert(Items, item(t, "after", 4))
      }))
      const names = (yield* store.find(Items, { where: { tenantId: t }, orderBy: "price" })).map((r) => r.name)
      assert.deepStrictEqual(names, ["outer", "committed inner", "after"])
    }))

  it.effect("an expected failure inside a transaction leaves it usable", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      yield* store.insert(Items, { ...item(t, "taken", 1), id: `${t}-taken` })
      const refused = yield* store.transaction(Effect.gen(function*() {
        const duplicate = yield* Effect.flip(store.insert(Items, { ...item(t, "again", 2), id: `${t}-taken` }))
        const duplicates = yield* Effect.flip(store.insertMany(Items, [item(t, "m", 3), { ...item(t, "again", 2), id: `${t}-taken` }]))
        const missing = yield* Effect.flip(store.update(Items, "missing", { price: 1 }))
        const invalid = yield* Effect.flip(store.insert(Items, { price: "bad" } as never))
        yield* store.insert(Items, item(t, "after", 4))
        return [duplicate._tag, duplicates._tag, missing._tag, invalid._tag]
      }))
      assert.deepStrictEqual(refused, ["DuplicateRow", "DuplicateRow", "RowNotFound", "RowInvalid"])
      const names = (yield* store.find(Items, { where: { tenantId: t }, orderBy: "price" })).map((r) => r.name)
      assert.deepStrictEqual(names, ["taken", "after"])
    }))

  it.effect("other fibers never observe a transaction's uncommitted writes", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      const written = yield* Deferred.make<string>()
      const release = yield* Deferred.make<void>()
      const writer = yield* Effect.fork(Effect.either(store.transaction(Effect.gen(function*() {
        const row = yield* store.insert(Items, item(t, "uncommitted", 1))
        yield* Deferred.succeed(written, row.id)
        yield* Deferred.await(release)
        return yield* Effect.fail("roll back" as const)
      }))))
      const id = yield* Deferred.await(written)
      const reader = yield* Effect.fork(Effect.all([store.get(Items, id), store.count(Items, { where: { tenantId: t } })]))
      // SQLite has one connection: the reader waits for the transaction to end. Elsewhere it reads now.
      if (store.dialect === "sqlite") yield* Deferred.succeed(release, undefined)
      const [seen, count] = yield* Fiber.join(reader)
      assert.isTrue(Option.isNone(seen))
      assert.strictEqual(count, 0)
      yield* Deferred.succeed(release, undefined)
      assert.deepStrictEqual(yield* Fiber.join(writer), Either.left("roll back" as const))
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t } }), 0)
    }))

  it.effect("concurrent updates of different fields of one row both land", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const t = freshTenant()
      const rows = yield* store.insertMany(Items, Array.from({ length: 10 }, (_, i) => item(t, `r${i}`, 0)))
      yield* Effect.forEach(
        rows,
        (row) =>
          Effect.all([
            store.update(Items, row.id, { price: 7 }),
            store.update(Items, row.id, { name: `${row.name}!` }),
            store.update(Items, row.id, { tags: ["x"] })
          ], { concurrency: "unbounded" }),
        { concurrency: "unbounded", discard: true }
      )
      const after = yield* store.find(Items, { where: { tenantId: t }, orderBy: "name" })
      assert.deepStrictEqual(
        after.map((r) => [r.name, r.price, r.tags]),
        rows.map((r) => [`${r.name}!`, 7, ["x"]]).sort()
      )
    }))
}
