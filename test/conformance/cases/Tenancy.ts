/**
 * Conformance: a Subject sees and writes only its tenant's rows; system code sees every tenant.
 */
import type { Vitest } from "@effect/vitest"
import { assert } from "@effect/vitest"
import { Chunk, Effect, Option, Stream } from "effect"
import * as Store from "../../../src/kernel/store/Store.js"
import * as Subject from "../../../src/kernel/Subject.js"
import type { Services } from "../fixtures.js"
import { Events, freshTenant, item, Items, member } from "../fixtures.js"

export const tenancy = (it: Vitest.MethodsNonLive<Services>) => {
  it.effect("reads for a Subject see only its tenant: get, find, count, walk", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const [a, b] = [freshTenant(), freshTenant()]
      const rowA = yield* store.insert(Items, item(a, "a1", 1))
      const rowB = yield* store.insert(Items, item(b, "b1", 1))
      const both = { tenantId: { in: [a, b] } }
      yield* Effect.gen(function*() {
        assert.deepStrictEqual((yield* store.find(Items, { where: both })).map((r) => r.id), [rowA.id])
        assert.deepStrictEqual((yield* store.find(Items, { where: { id: rowB.id } })).length, 0)
        assert.isTrue(Option.isSome(yield* store.get(Items, rowA.id)))
        assert.isTrue(Option.isNone(yield* store.get(Items, rowB.id)))
        assert.strictEqual(yield* store.count(Items, { where: { tenantId: b } }), 0)
        assert.strictEqual(yield* store.count(Items, { where: both }), 1)
        const walked = yield* store.walk(Items, { where: both }).pipe(Stream.runCollect)
        assert.deepStrictEqual(Chunk.toReadonlyArray(walked).map((r) => r.id), [rowA.id])
      }).pipe(Subject.actingAs(member(a)))
      // System code (no Subject) is unscoped.
      assert.strictEqual(yield* store.count(Items, { where: both }), 2)
      assert.isTrue(Option.isSome(yield* store.get(Items, rowB.id)))
      yield* Subject.asSystem(Effect.gen(function*() {
        assert.strictEqual(yield* store.count(Items, { where: both }), 2)
      })).pipe(Subject.actingAs(member(a)))
    }))

  it.effect("writes for a Subject cannot touch or name another tenant", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const [a, b] = [freshTenant(), freshTenant()]
      const rowA = yield* store.insert(Items, item(a, "a1", 1))
      const rowB = yield* store.insert(Items, item(b, "b1", 1))
      const tags = yield* Effect.gen(function*() {
        const tag = (effect: Effect.Effect<unknown, { readonly _tag: string }>) => Effect.map(Effect.flip(effect), (e) => e._tag)
        return {
          updateOther: yield* tag(store.update(Items, rowB.id, { price: 9 })),
          deleteOther: yield* tag(store.delete(Items, rowB.id)),
          insertOther: yield* tag(store.insert(Items, item(b, "sneaky", 1))),
          insertManyOther: yield* tag(store.insertMany(Items, [item(a, "fine", 1), item(b, "sneaky", 1)])),
          upsertOther: yield* tag(store.upsert(Items, { ...item(b, "sneaky", 1), id: `${b}-new` })),
          moveOwn: yield* tag(store.update(Items, rowA.id, { tenantId: b })),
          upsertOverOther: yield* tag(store.upsert(Items, { ...item(a, "steal", 1), id: rowB.id }))
        }
      }).pipe(Subject.actingAs(member(a)))
      assert.deepStrictEqual(tags, {
        updateOther: "RowNotFound",
        deleteOther: "RowNotFound",
        insertOther: "TenantViolation",
        insertManyOther: "TenantViolation",
        upsertOther: "TenantViolation",
        moveOwn: "TenantViolation",
        // The id is taken: the other tenant's row is never overwritten.
        upsertOverOther: "DuplicateRow"
      })
      const untouched = Option.getOrThrow(yield* store.get(Items, rowB.id))
      assert.deepStrictEqual([untouched.tenantId, untouched.name, untouched.price], [b, "b1", 1])
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: { in: [a, b] } } }), 2)
      // Its own rows it may write.
      const own = yield* Effect.gen(function*() {
        yield* store.update(Items, rowA.id, { price: 2 })
        const added = yield* store.insert(Items, item(a, "a2", 3))
        yield* store.upsert(Items, { ...added, price: 4 })
        yield* store.delete(Items, added.id)
        return yield* store.get(Items, rowA.id)
      }).pipe(Subject.actingAs(member(a)))
      assert.strictEqual(Option.getOrThrow(own).price, 2)
      // The system may move a row between tenants.
      assert.strictEqual((yield* store.update(Items, rowA.id, { tenantId: b })).tenantId, b)
    }))

  it.effect("a Subject without a tenant sees no tenant rows and cannot write them; shared tables are shared", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const a = freshTenant()
      const rowA = yield* store.insert(Items, item(a, "a1", 1))
      const outcome = yield* Effect.gen(function*() {
        return {
          count: yield* store.count(Items, { where: { tenantId: a } }),
          found: (yield* store.find(Items, { where: { tenantId: a } })).length,
          got: Option.isSome(yield* store.get(Items, rowA.id)),
          walked: yield* store.walk(Items).pipe(Stream.runCount),
          insert: (yield* Effect.flip(store.insert(Items, item(a, "x", 1))))._tag,
          update: (yield* Effect.flip(store.update(Items, rowA.id, { price: 5 })))._tag
        }
      }).pipe(Subject.actingAs(member(null)))
      assert.deepStrictEqual(outcome, { count: 0, found: 0, got: false, walked: 0, insert: "TenantViolation", update: "RowNotFound" })
      const shared = yield* store.insert(Events, { kind: "shared", n: 1 }).pipe(Subject.actingAs(member(a)))
      const seenByOther = yield* store.get(Events, shared.id).pipe(Subject.actingAs(member(freshTenant())))
      assert.isTrue(Option.isSome(seenByOther))
      const seenByNobody = yield* store.get(Events, shared.id).pipe(Subject.actingAs(member(null)))
      assert.isTrue(Option.isSome(seenByNobody))
    }))
}
