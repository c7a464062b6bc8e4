/**
 * The store conformance suite: one set of behaviours every tier must show identically.
 */
import { assert, it as baseIt, layer } from "@effect/vitest"
import type { SqlClient } from "@effect/sql"
import { Chunk, Effect, Either, Exit, Layer, Option, Schema, Stream } from "effect"
import type { ChangeEvent } from "../../src/kernel/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Provenance from "../../src/kernel/Provenance.js"
import * as SchemaDiffer from "../../src/kernel/SchemaDiffer.js"
import * as Store from "../../src/kernel/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/Table.js"

export const Items = defineTable("items", {
  fields: {
    tenantId: Schema.String,
    name: Schema.String,
    price: Schema.Number,
    active: Schema.Boolean,
    note: Schema.optional(Schema.String),
    tags: Schema.Array(Schema.String),
    meta: Schema.NullOr(Schema.Struct({ color: Schema.String }))
  },
  tenantField: "tenantId",
  indexes: [["tenantId", "price"]]
})

export const Events = defineTable("events", {
  fields: { kind: Schema.String, n: Schema.Number }
})

export const tables = [Items, Events]

/** Builds the tier under test with the real local change tap. */
export type Tier = Layer.Layer<Store.Store | ChangeTap.ChangeTap, unknown>

/** A SQL tier over `client`, with the schema applied. */
export const sqlTier = (client: Layer.Layer<SqlClient.SqlClient, unknown>): Tier =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables)).pipe(Layer.provideMerge(client)))
  )

export const memoryTier: Tier = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

let counter = 0
/** A tenant no other test uses, so tests sharing one database do not see each other. */
const freshTenant = () => `t${Date.now().toString(36)}${(counter++).toString(36)}`

const item = (tenantId: string, name: string, price: number, extra: Partial<typeof Items.schema.Type> = {}) => ({
  tenantId,
  name,
  price,
  active: price % 2 === 0,
  tags: [name],
  meta: null,
  ...extra
})

const member = (tenantId: string | null) => Subject.make({ type: "user", id: `u-${tenantId}`, tenantId })

/** Collects the change events published while `effect` runs. */
const collectChanges = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const tap = yield* ChangeTap.ChangeTap
    const seen: Array<ChangeEvent> = []
    const result = yield* Effect.scoped(Effect.gen(function*() {
      yield* tap.subscribe({ name: "test", onEvent: (event) => Effect.sync(() => void seen.push(event)) })
      return yield* Effect.exit(effect)
    }))
    return [result, seen] as const
  })

/** Runs the conformance suite on `tier`. */
export const conformance = (name: string, tier: Tier, options: { readonly timeout?: number } = {}) =>
  layer(tier, { timeout: options.timeout ?? 30_000 })(`store conformance: ${name}`, (it) => {
    it.effect("insert, get, update, upsert, delete", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const t = freshTenant()
        const inserted = yield* store.insert(Items, item(t, "apple", 3, { note: "fresh", meta: { color: "red" } }))
        assert.isString(inserted.id)
        const read = yield* store.get(Items, inserted.id)
        assert.deepStrictEqual(Option.getOrThrow(read), inserted)
        const updated = yield* store.update(Items, inserted.id, { price: 4, tags: ["a", "b"] })
        assert.deepStrictEqual([updated.price, updated.tags, updated.note, updated.meta], [4, ["a", "b"], "fresh", { color: "red" }])
        assert.deepStrictEqual(Option.getOrThrow(yield* store.get(Items, inserted.id)), updated)
        const replaced = yield* store.upsert(Items, { ...item(t, "apple", 5), id: inserted.id })
        assert.strictEqual(replaced.note, undefined)
        assert.deepStrictEqual(Option.getOrThrow(yield* store.get(Items, inserted.id)), replaced)
        const created = yield* store.upsert(Items, { ...item(t, "pear", 1), id: `${t}-pear` })
        assert.strictEqual(created.id, `${t}-pear`)
        yield* store.delete(Items, inserted.id)
        assert.isTrue(Option.isNone(yield* store.get(Items, inserted.id)))
      }))

    it.effect("typed errors: RowNotFound, DuplicateRow, RowInvalid, UnknownField", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const t = freshTenant()
        const row = yield* store.insert(Items, item(t, "a", 1))
        const notFound = yield* Effect.flip(store.update(Items, "missing", { price: 1 }))
        assert.strictEqual(notFound._tag, "RowNotFound")
        assert.strictEqual((yield* Effect.flip(store.delete(Items, "missing")))._tag, "RowNotFound")
        const duplicate = yield* Effect.flip(store.insert(Items, { ...item(t, "b", 2), id: row.id }))
        assert.deepStrictEqual([duplicate._tag, duplicate._tag === "DuplicateRow" ? duplicate.id : ""], ["DuplicateRow", row.id])
        const invalid = yield* Effect.flip(store.insert(Items, { ...item(t, "c", 3), price: "three" } as never))
        assert.strictEqual(invalid._tag, "RowInvalid")
        const unknown = yield* Effect.flip(store.find(Items, { where: { nope: 1 } as never }))
        assert.strictEqual(unknown._tag, "UnknownField")
        const badOrder = yield* Effect.flip(store.find(Items, { orderBy: "nope" as never }))
        assert.strictEqual(badOrder._tag, "UnknownField")
        // Nothing was written by the failed calls.
        assert.strictEqual(yield* store.count(Items, { where: { tenantId: t } }), 1)
      }))

    it.effect("filters, ordering and paging", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const t = freshTenant()
        yield* store.insertMany(Items, [
          item(t, "d", 4),
          item(t, "a", 1, { note: "x" }),
          item(t, "c", 3),
          item(t, "b", 2, { note: "y" }),
          item(t, "e", 2)
        ])
        const names = (where: Store.Where<typeof Items>, extra: Store.FindOptions<typeof Items> = {}) =>
          Effect.map(store.find(Items, { orderBy: "name", ...extra, where: { tenantId: t, ...where } }), (rows) => rows.map((r) => r.name))
        assert.deepStrictEqual(yield* names({}), ["a", "b", "c", "d", "e"])
        assert.deepStrictEqual(yield* names({ price: 2 }), ["b", "e"])
        assert.deepStrictEqual(yield* names({ price: { neq: 2 } }), ["a", "c", "d"])
        assert.deepStrictEqual(yield* names({ price: { gt: 2 } }), ["c", "d"])
        assert.deepStrictEqual(yield* names({ price: { gte: 3 } }), ["c", "d"])
        assert.deepStrictEqual(yield* names({ price: { lt: 2 } }), ["a"])
        assert.deepStrictEqual(yield* names({ price: { lte: 2 } }), ["a", "b", "e"])
        assert.deepStrictEqual(yield* names({ price: { gt: 1, lt: 4 } }), ["b", "c", "e"])
        assert.deepStrictEqual(yield* names({ name: { in: ["a", "c", "zz"] } }), ["a", "c"])
        assert.deepStrictEqual(yield* names({ name: { nin: ["a", "c"] } }), ["b", "d", "e"])
        assert.deepStrictEqual(yield* names({ name: { in: [] } }), [])
        assert.deepStrictEqual(yield* names({ active: true }), ["b", "d", "e"])
        assert.deepStrictEqual(yield* names({ note: "y" }), ["b"])
        assert.deepStrictEqual(yield* names({ note: { neq: "y" } }), ["a"])
        assert.deepStrictEqual(yield* names({ name: { gte: "b", lt: "d" } }), ["b", "c"])
        // Ordering by price with ties broken by id, both directions, and paging.
        const byPrice = yield* store.find(Items, { where: { tenantId: t }, orderBy: "price", direction: "desc" })
        assert.deepStrictEqual(byPrice.map((r) => r.price), [4, 3, 2, 2, 1])
        assert.deepStrictEqual(yield* names({}, { limit: 2 }), ["a", "b"])
        assert.deepStrictEqual(yield* names({}, { limit: 2, offset: 2 }), ["c", "d"])
        assert.deepStrictEqual(yield* names({}, { offset: 3 }), ["d", "e"])
        assert.deepStrictEqual(yield* names({}, { direction: "desc", limit: 1 }), ["e"])
        assert.strictEqual(yield* store.count(Items, { where: { tenantId: t, price: { gte: 2 } } }), 4)
      }))

    it.effect("the keyset walk streams 10,000 rows in id order, one page at a time", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const t = freshTenant()
        const rows = Array.from({ length: 10_000 }, (_, i) => ({ ...item(t, `n${i}`, i), id: `${t}-${String(i).padStart(5, "0")}` }))
        yield* store.insertMany(Items, rows)
        const walked = yield* store.walk(Items, { where: { tenantId: t }, pageSize: 1000 }).pipe(
          Stream.map((row) => row.id),
          Stream.runCollect
        )
        const ids = Chunk.toReadonlyArray(walked)
        assert.strictEqual(ids.length, 10_000)
        assert.deepStrictEqual(ids, rows.map((r) => r.id))
        const firstFew = yield* store.walk(Items, { where: { tenantId: t }, pageSize: 3 }).pipe(Stream.take(4), Stream.runCollect)
        assert.strictEqual(Chunk.size(firstFew), 4)
      }))

    it.effect("transactions commit, roll back, and nest as savepoints", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const t = freshTenant()
        yield* store.transaction(Effect.all([store.insert(Items, item(t, "kept1", 1)), store.insert(Items, item(t, "kept2", 2))]))
        const failed = yield* Effect.exit(store.transaction(Effect.gen(function*() {
          yield* store.insert(Items, item(t, "lost", 3))
          return yield* Effect.fail("abort" as const)
        })))
        assert.isTrue(Exit.isFailure(failed))
        yield* store.transaction(Effect.gen(function*() {
          yield* store.insert(Items, item(t, "outer", 4))
          const inner = yield* Effect.either(store.transaction(Effect.gen(function*() {
            yield* store.insert(Items, item(t, "inner", 5))
            return yield* Effect.fail("inner abort" as const)
          })))
          assert.isTrue(Either.isLeft(inner))
          yield* store.insert(Items, item(t, "after", 6))
        }))
        const names = (yield* store.find(Items, { where: { tenantId: t }, orderBy: "price" })).map((r) => r.name)
        assert.deepStrictEqual(names, ["kept1", "kept2", "outer", "after"])
      }))

    it.effect("tenant isolation for a Subject; the system sees every tenant", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const a = freshTenant()
        const b = freshTenant()
        const rowA = yield* store.insert(Items, item(a, "a1", 1))
        const rowB = yield* store.insert(Items, item(b, "b1", 1))
        yield* Effect.gen(function*() {
          assert.deepStrictEqual((yield* store.find(Items, { where: { tenantId: { in: [a, b] } } })).map((r) => r.id), [rowA.id])
          assert.isTrue(Option.isNone(yield* store.get(Items, rowB.id)))
          assert.strictEqual(yield* store.count(Items, { where: { tenantId: b } }), 0)
          assert.strictEqual((yield* Effect.flip(store.update(Items, rowB.id, { price: 9 })))._tag, "RowNotFound")
          assert.strictEqual((yield* Effect.flip(store.delete(Items, rowB.id)))._tag, "RowNotFound")
          assert.strictEqual((yield* Effect.flip(store.insert(Items, item(b, "sneaky", 1))))._tag, "TenantViolation")
          assert.strictEqual((yield* Effect.flip(store.update(Items, rowA.id, { tenantId: b })))._tag, "TenantViolation")
          assert.strictEqual((yield* Effect.flip(store.upsert(Items, { ...item(a, "steal", 1), id: rowB.id })))._tag, "DuplicateRow")
          const walked = yield* store.walk(Items, { where: { tenantId: { in: [a, b] } } }).pipe(Stream.runCollect)
          assert.strictEqual(Chunk.size(walked), 1)
          yield* store.update(Items, rowA.id, { price: 2 })
        }).pipe(Subject.actingAs(member(a)))
        yield* Effect.gen(function*() {
          assert.strictEqual(yield* store.count(Items, { where: { tenantId: { in: [a, b] } } }), 0)
          assert.strictEqual((yield* Effect.flip(store.insert(Items, item(a, "x", 1))))._tag, "TenantViolation")
        }).pipe(Subject.actingAs(member(null)))
        assert.strictEqual(yield* store.count(Items, { where: { tenantId: { in: [a, b] } } }), 2)
        assert.strictEqual(Option.getOrThrow(yield* store.get(Items, rowB.id)).price, 1)
        // Tables without a tenant field are shared.
        const shared = yield* store.insert(Events, { kind: "shared", n: 1 }).pipe(Subject.actingAs(member(a)))
        assert.isTrue(Option.isSome(yield* store.get(Events, shared.id).pipe(Subject.actingAs(member(b)))))
      }))

    it.effect("change events: after commit, in order, with provenance; none for rolled-back work", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const t = freshTenant()
        const provenance = { traceId: "trace-1", subjectId: "u1", procedure: "items.add" }
        const [, events] = yield* collectChanges(Effect.gen(function*() {
          const row = yield* store.insert(Items, item(t, "x", 1))
          yield* store.update(Items, row.id, { price: 2 })
          yield* store.update(Items, row.id, { price: 3 })
          yield* Effect.either(store.transaction(Effect.zipRight(store.insert(Items, item(t, "rolled", 1)), Effect.fail("no"))))
          yield* store.transaction(Effect.gen(function*() {
            yield* Effect.either(store.transaction(Effect.zipRight(store.insert(Items, item(t, "savepoint", 1)), Effect.fail("no"))))
            yield* store.delete(Items, row.id)
          }))
        }).pipe(Provenance.withProvenance(provenance)))
        assert.deepStrictEqual(events.map((e) => e.op), ["insert", "update", "update", "delete"])
        assert.deepStrictEqual(events.map((e) => e.after?.price ?? null), [1, 2, 3, null])
        assert.deepStrictEqual(events[3]!.before?.price, 3)
        assert.isTrue(events.every((e) => e.tenantId === t && e.table === "items"))
        assert.deepStrictEqual(events[0]!.provenance, provenance)
        const seqs = events.map((e) => e.seq)
        assert.deepStrictEqual(seqs, [...seqs].sort((x, y) => x - y))
      }))

    it.effect("a transaction publishes only after it commits", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const t = freshTenant()
        const [, events] = yield* collectChanges(store.transaction(Effect.gen(function*() {
          yield* store.insert(Items, item(t, "one", 1))
          yield* store.insert(Items, item(t, "two", 2))
        })))
        assert.strictEqual(events.length, 2)
      }))

    it.effect("trackReads names the tables a computation read", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const [, read] = yield* Store.trackReads(Effect.all([store.count(Items), store.get(Events, "x")]))
        assert.deepStrictEqual([...read].sort(), ["events", "items"])
      }))
  })

export { baseIt }
