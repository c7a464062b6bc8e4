/**
 * Search sync in batches (issue 37), on every store tier: the changes of an index go to the engine
 * in batches, coalesced per row to its latest state; a row's later batch never overtakes its
 * earlier one; one refused document fails only its row; and the lag (`backlog`, `lagMs`, the
 * gauges) is non-zero while changes wait and zero once they are in.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, FiberId, Metric, Stream, TestClock } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import type { Options } from "../../src/search/Options.js"
import type { SearchBackendShape, WriteOp } from "../../src/search/SearchBackend.js"
import type { SearchPlugin } from "../../src/search/SearchPlugin.js"
import * as Sync from "../../src/search/Sync.js"
import { SearchDrift } from "../../src/search/tables.js"
import * as Pg from "../support/Pg.js"
import { type Client, flakyBackend, Notes, plugin, settled, stack } from "./support.js"

/** A flaky engine whose first batch is held until `release`, recording every batch it receives. */
const heldEngine = () => {
  const flaky = flakyBackend()
  const gate = Deferred.unsafeMake<void>(FiberId.none)
  const calls: Array<ReadonlyArray<WriteOp>> = []
  const backend: SearchBackendShape = {
    ...flaky.backend,
    write: (index, ops) =>
      Effect.suspend(() => {
        calls.push(ops)
        const write = flaky.backend.write!(index, ops)
        return calls.length === 1 ? Effect.zipRight(Deferred.await(gate), write) : write
      })
  }
  return { flaky, backend, calls, release: Deferred.succeed(gate, undefined) }
}

const tapSettled = Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.settled)
const docs = (backend: SearchBackendShape) => Effect.map(Stream.runCollect(backend.documents!("notes")), Chunk.toReadonlyArray)
const titles = (backend: SearchBackendShape) =>
  Effect.map(docs(backend), (all) => Object.fromEntries(all.map((doc) => [doc.id, doc["title"]])))
/** A batch as `id:title` (`id:-` for a removal). */
const shape = (ops: ReadonlyArray<WriteOp>) => ops.map((op) => `${op.id}:${op.doc === null ? "-" : String(op.doc["title"])}`)
const note = (id: string, title: string, n = 1) => ({ id, tenantId: "t1", title, body: "", n })

const suite = (name: string, client: () => Client | null) =>
  describe(`search sync in batches: ${name}`, () => {
    const test = (
      title: string,
      options: Partial<Options>,
      body: (t: { readonly store: Store.StoreShape; readonly engine: ReturnType<typeof heldEngine>; readonly p: SearchPlugin }) => Effect.Effect<void, unknown, Store.Store | ChangeTap.ChangeTap>
    ) =>
      it.scoped(title, () => {
        const engine = heldEngine()
        const p = plugin(engine.backend, options)
        return Effect.flatMap(Store.Store, (store) => body({ store, engine, p })).pipe(Effect.provide(stack(client(), p)))
      })

    test("changes wait while the batches in flight are full, then go in one batch coalesced to each row's last state", { sync: { batchesInFlight: 1 } }, ({ engine, store }) =>
      Effect.gen(function*() {
        yield* store.insert(Notes, note("a0", "first"))
        // Meanwhile: a1 inserted, updated, deleted (one removal); a2 inserted and updated (one
        // upsert of its last version); a0 changed while its own batch is in flight.
        yield* store.insert(Notes, note("a1", "gone"))
        yield* store.update(Notes, "a1", { title: "gone again" })
        yield* store.delete(Notes, "a1")
        yield* store.insert(Notes, note("a2", "v1"))
        yield* store.update(Notes, "a2", { title: "v2" })
        yield* store.update(Notes, "a0", { title: "second" })
        yield* tapSettled
        assert.deepStrictEqual(engine.calls.map(shape), [["a0:first"]])
        yield* engine.release
        yield* settled
        assert.deepStrictEqual(engine.calls.map(shape), [["a0:first"], ["a1:-", "a2:v2", "a0:second"]])
        assert.deepStrictEqual(yield* titles(engine.flaky.backend), { a0: "second", a2: "v2" })
      }))

    test("a row's later change waits for its earlier batch while other rows go on", { sync: { batchesInFlight: 4 } }, ({ engine, store }) =>
      Effect.gen(function*() {
        yield* store.insert(Notes, note("o1", "v1"))
        yield* tapSettled
        yield* store.update(Notes, "o1", { title: "v2" })
        yield* store.insert(Notes, note("o2", "other"))
        yield* store.update(Notes, "o1", { title: "v3" })
        yield* tapSettled
        // o2 went out in a batch of its own; o1's later versions wait behind its first batch.
        assert.deepStrictEqual(engine.calls.map(shape), [["o1:v1"], ["o2:other"]])
        yield* engine.release
        yield* settled
        assert.deepStrictEqual(engine.calls.map(shape), [["o1:v1"], ["o2:other"], ["o1:v3"]])
        assert.deepStrictEqual(yield* titles(engine.flaky.backend), { o1: "v3", o2: "other" })
      }))

    test("a document the engine refuses, or that map cannot make, fails only its row; the rest of its batch lands", { sync: { batchesInFlight: 1 } }, ({ engine, p, store }) =>
      Effect.gen(function*() {
        engine.flaky.state.refuse.add("p3")
        yield* store.insert(Notes, note("p0", "held"))
        yield* Effect.forEach(["p1", "p2", "p3", "p4", "p5"], (id) => store.insert(Notes, note(id, `title ${id}`)), { discard: true })
        yield* store.insert(Notes, note("p6", "boom"))
        yield* tapSettled
        yield* engine.release
        yield* settled
        assert.deepStrictEqual(shape(engine.calls[1]!), ["p1:title p1", "p2:title p2", "p3:title p3", "p4:title p4", "p5:title p5"])
        assert.deepStrictEqual(Object.keys(yield* titles(engine.flaky.backend)).sort(), ["p0", "p1", "p2", "p4", "p5"])
        const entries = yield* store.find(SearchDrift, { orderBy: "id" })
        assert.deepStrictEqual(entries.map((e) => [e.rowId, e.state, e.errorKind]), [["p3", "failed", "permanent"], ["p6", "failed", "permanent"]])
        assert.match(entries[1]!.lastError, /cannot index boom/)
        const [view] = yield* Effect.flatMap(p.running, (running) => running.engine.view)
        assert.strictEqual(view!.dropped, 2)
        assert.strictEqual(view!.ledgerEntries, 2)
      }))

    test("the lag is public: backlog, lagMs and the gauges are non-zero while changes wait, zero once they are in", { sync: { batchesInFlight: 1 } }, ({ engine, p, store }) =>
      Effect.gen(function*() {
        const view = Effect.map(Effect.flatMap(p.running, (running) => running.engine.view), (views) => views[0]!)
        const backlogGauge = Metric.value(Metric.tagged(Sync.backlogGauge, "index", "notes"))
        const lagGauge = Metric.value(Metric.tagged(Sync.lagGauge, "index", "notes"))
        yield* store.insert(Notes, note("l1", "waiting"))
        yield* store.insert(Notes, note("l2", "waiting too"))
        yield* tapSettled
        yield* TestClock.adjust("3 seconds")
        const waiting = yield* view
        assert.strictEqual(waiting.backlog, 2)
        assert.strictEqual(waiting.pendingDrift, 2)
        assert.strictEqual(waiting.lagMs, 3000)
        assert.strictEqual(waiting.drifted, false)
        assert.strictEqual((yield* backlogGauge).value, 2)
        assert.strictEqual((yield* lagGauge).value, 3000)
        yield* engine.release
        yield* settled
        const caughtUp = yield* view
        assert.deepStrictEqual([caughtUp.backlog, caughtUp.pendingDrift, caughtUp.lagMs, caughtUp.drifted], [0, 0, 0, false])
        assert.strictEqual((yield* backlogGauge).value, 0)
        assert.strictEqual((yield* lagGauge).value, 0)
      }))
  })

suite("memory store", () => null)
suite("sqlite", () => SqliteClient.layer({ filename: ":memory:" }))
if (Pg.serverUrl !== null) suite("postgresql", () => Pg.layerFreshClient)
else describe("search sync in batches: postgresql", () => it("is skipped", () => console.warn(Pg.skipReason)))
