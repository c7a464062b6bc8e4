/**
 * Conformance: change events are staged inside the outermost transaction, published after it
 * commits, carry provenance and the Clock's time, and are dropped with rolled-back work; reads are
 * tracked per table.
 */
import type { Vitest } from "@effect/vitest"
import { assert } from "@effect/vitest"
import { Effect, Stream, TestClock } from "effect"
import * as Provenance from "../../../src/kernel/changes/Provenance.js"
import * as Store from "../../../src/kernel/store/Store.js"
import type { Services } from "../fixtures.js"
import { Events, freshRecorder, freshTenant, item, Items } from "../fixtures.js"

const provenance: Provenance.Provenance = { traceId: "trace-1", subjectId: "u1", procedure: "items.add" }

export const changes = (it: Vitest.MethodsNonLive<Services>) => {
  it.effect("each write outside a transaction is staged, then published, with provenance and the Clock's time", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const recorder = yield* freshRecorder
      const t = freshTenant()
      yield* TestClock.setTime(1_700_000_000_000)
      const row = yield* store.insert(Items, item(t, "x", 1))
      yield* TestClock.adjust(5)
      yield* store.update(Items, row.id, { price: 2 })
      yield* store.upsert(Items, { ...item(t, "x", 3), id: row.id })
      yield* store.delete(Items, row.id)
      yield* store.insertMany(Items, [item(t, "m1", 1), item(t, "m2", 2)])
      assert.deepStrictEqual(
        recorder.calls.map((call) => `${call.kind}:${call.changes.map((c) => c.op).join(",")}`),
        [
          "stage:insert", "publish:insert",
          "stage:update", "publish:update",
          "stage:update", "publish:update",
          "stage:delete", "publish:delete",
          "stage:insert,insert", "publish:insert,insert"
        ]
      )
      const published = recorder.published()
      assert.deepStrictEqual(published.slice(0, 4).map((c) => [c.op, c.before?.price ?? null, c.after?.price ?? null]), [
        ["insert", null, 1],
        ["update", 1, 2],
        ["update", 2, 3],
        ["delete", 3, null]
      ])
      assert.isTrue(published.every((c) => c.table === "items" && c.tenantId === t))
      assert.deepStrictEqual(published.slice(0, 4).map((c) => c.id), [row.id, row.id, row.id, row.id])
      assert.deepStrictEqual(published[0]!.provenance, provenance)
      assert.deepStrictEqual(published.map((c) => c.at), [1_700_000_000_000, ...Array(5).fill(1_700_000_000_005)])
      // Encoded rows: what the database holds, JSON-safe.
      assert.deepStrictEqual(published[0]!.after, { ...item(t, "x", 1), id: row.id })
    }).pipe(Provenance.withProvenance(provenance)))

  it.effect("a transaction stages its changes once before commit and publishes them once after; none on rollback", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const recorder = yield* freshRecorder
      const t = freshTenant()
      yield* Effect.either(store.transaction(Effect.gen(function*() {
        yield* store.insert(Items, item(t, "rolled back", 1))
        return yield* Effect.fail("no")
      })))
      assert.deepStrictEqual(recorder.calls, [])
      yield* store.transaction(Effect.gen(function*() {
        const kept = yield* store.insert(Items, item(t, "outer", 1))
        yield* Effect.either(store.transaction(Effect.gen(function*() {
          yield* store.insert(Items, item(t, "savepoint", 2))
          yield* store.update(Items, kept.id, { name: "savepoint edit" })
          return yield* Effect.fail("no")
        })))
        yield* store.transaction(store.insert(Items, item(t, "nested ok", 3)))
        yield* store.insert(Events, { kind: "other table", n: 1 })
        assert.deepStrictEqual(recorder.calls, [], "nothing leaves before the outermost commit")
      }))
      assert.deepStrictEqual(recorder.calls.map((call) => call.kind), ["stage", "publish"])
      assert.deepStrictEqual(recorder.calls[0]!.changes, recorder.calls[1]!.changes)
      assert.deepStrictEqual(
        recorder.published().map((c) => [c.table, c.op, c.after?.name ?? c.after?.kind]),
        [["items", "insert", "outer"], ["items", "insert", "nested ok"], ["events", "insert", "other table"]]
      )
    }))

  it.effect("a failing stage rolls the transaction back and publishes nothing", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const recorder = yield* freshRecorder
      const t = freshTenant()
      recorder.failNextStage = true
      const error = yield* Effect.flip(store.transaction(store.insert(Items, item(t, "staged", 1))))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.deepStrictEqual(recorder.calls.map((call) => call.kind), ["stage"])
      assert.strictEqual(yield* store.count(Items, { where: { tenantId: t } }), 0)
    }))

  it.effect("failed writes record nothing", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const recorder = yield* freshRecorder
      yield* Effect.flip(store.update(Items, "missing", { price: 1 }))
      yield* Effect.flip(store.insert(Items, { price: "bad" } as never))
      assert.deepStrictEqual(recorder.calls, [])
    }))

  it.effect("trackReads names the tables read by get, find, count and walk (nested trackers too), not by writes", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const [[inner, innerTables], outerTables] = yield* Store.trackReads(Effect.gen(function*() {
        yield* store.count(Items)
        return yield* Store.trackReads(Effect.gen(function*() {
          yield* store.get(Events, "x")
          return "done"
        }))
      }))
      assert.strictEqual(inner, "done")
      assert.deepStrictEqual([...innerTables], ["events"])
      assert.deepStrictEqual([...outerTables].sort(), ["events", "items"])
      const [, walked] = yield* Store.trackReads(Stream.runDrain(store.walk(Events, { where: { kind: "none" } })))
      assert.deepStrictEqual([...walked], ["events"])
      const [, found] = yield* Store.trackReads(store.find(Items, { where: { tenantId: "none" } }))
      assert.deepStrictEqual([...found], ["items"])
      const [, written] = yield* Store.trackReads(store.insert(Events, { kind: "write", n: 1 }))
      assert.deepStrictEqual([...written], [])
    }))
}
