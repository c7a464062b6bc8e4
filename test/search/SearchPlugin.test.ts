import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Clock, ConfigProvider, Deferred, type Duration, Effect, Exit, Layer, Logger, Option, Redacted, type Scope, Stream, TestClock } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { SearchConfigInvalid } from "../../src/search/Errors.js"
import * as Sql from "../../src/search/Sql.js"
import { reindexCommand, searchPlugin } from "../../src/search/SearchPlugin.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import { SearchDrift, SearchPending, SearchStats } from "../../src/search/tables.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Pg from "../support/Pg.js"
import type { StoreShape } from "../../src/kernel/store/Store.js"
import type { Options } from "../../src/search/Options.js"
import type { SearchBackendShape } from "../../src/search/SearchBackend.js"
import type { SearchPlugin } from "../../src/search/SearchPlugin.js"
import { type Client, flakyBackend, Notes, notesIndex, plugin, search, settled, stack } from "./support.js"

/** Rows of the drift proof: 200 in the suite; `SEARCH_DRIFT_ROWS=10000` runs it at full size (with a longer timeout). */
const ROWS = Number(process.env.SEARCH_DRIFT_ROWS ?? 200)
const alice = Subject.make({ type: "user", id: "alice", tenantId: "t1" })

/** The documents of the `notes` index, as the engine holds them. */
const indexDocs = (backend: SearchBackendShape) => Effect.map(Stream.runCollect(backend.documents!("notes")), Chunk.toReadonlyArray)

const indexIds = (backend: SearchBackendShape) => Effect.map(indexDocs(backend), (docs) => docs.map((doc) => doc.id).sort())

const ledger = Effect.flatMap(Store.Store, (store) => store.find(SearchDrift, { orderBy: "id" }))
const pending = Effect.flatMap(Store.Store, (store) => store.find(SearchPending, { orderBy: "id" }))

/**
 * Moves the test clock on in steps until `done` holds. Retries and sweeps do real database work
 * between their waits, so one big jump could pass a wait scheduled after it.
 */
const advanceUntil = <E, R>(done: Effect.Effect<boolean, E, R>, step: Duration.DurationInput = "50 millis") =>
  Effect.gen(function*() {
    for (let i = 0; i < 10_000; i++) {
      if (yield* done) return
      yield* TestClock.adjust(step)
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage("advanceUntil: the condition never held")
  })

const suite = (name: string, client: () => Client | null, restartable: Effect.Effect<Client, never, Scope.Scope> | null) =>
  describe(`search plugin: ${name}`, () => {
    /** A test over a flaky engine: the plugin over it with `options`, started on this suite's store tier. */
    const flakyTest = <E>(
      title: string,
      options: Partial<Options>,
      body: (test: { readonly store: StoreShape; readonly flaky: ReturnType<typeof flakyBackend>; readonly p: SearchPlugin }) => Effect.Effect<void, E, Store.Store | ChangeTap.ChangeTap | Scope.Scope>
    ) =>
      it.scoped(title, () => {
        const flaky = flakyBackend()
        const p = plugin(flaky.backend, options)
        return Effect.flatMap(Store.Store, (store) => body({ store, flaky, p })).pipe(Effect.provide(stack(client(), p)))
      })

    it.scoped("inserts, updates and deletes reach the index; search.query answers in the caller's tenant", () => {
      const p = plugin("memory")
      return Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Notes, { id: "n1", tenantId: "t1", title: "Alpha report", body: "quarterly numbers", n: 1 })
        yield* store.insert(Notes, { id: "n2", tenantId: "t2", title: "Alpha plan", body: "other tenant", n: 2 })
        yield* store.insert(Notes, { id: "n3", tenantId: "t1", title: "Beta", body: "alpha in body", n: 3 })
        yield* settled
        let result = yield* search(p, alice, { index: "notes", q: "alpha" })
        assert.deepStrictEqual(result.hits.map((h) => h.doc["id"]).sort(), ["n1", "n3"])
        yield* store.update(Notes, "n1", { title: "Gamma report" })
        yield* store.delete(Notes, "n3")
        yield* settled
        result = yield* search(p, alice, { index: "notes", q: "alpha" })
        assert.deepStrictEqual(result.hits.map((h) => h.doc["id"]), [])
        result = yield* search(p, alice, { index: "notes", q: "gama", fuzziness: 1, facets: ["n"] })
        assert.deepStrictEqual(result.hits.map((h) => h.doc["id"]), ["n1"])
        assert.deepStrictEqual(result.facets, { n: { "1": 1 } })
      }).pipe(Effect.provide(stack(client(), p)))
    })

    flakyTest("a transient failure is retried with backoff; the ledger entry is written first and cleared on success", {}, ({ store, flaky, p }) =>
      Effect.gen(function*() {
        flaky.state.mode = "transient"
        yield* store.insert(Notes, { id: "r1", tenantId: "t1", title: "retry me", body: "", n: 1 })
        yield* settled
        const entries = yield* ledger
        assert.deepStrictEqual(entries.map((e) => [e.id, e.state, e.errorKind, e.attempts]), [["notes:r1", "retrying", "transient", 1]])
        yield* advanceUntil(Effect.sync(() => flaky.state.failures >= 2))
        assert.strictEqual(flaky.state.failures, 2)
        flaky.state.mode = "up"
        yield* advanceUntil(Effect.map(ledger, (entries) => entries.length === 0))
        yield* p.idle
        assert.deepStrictEqual(yield* ledger, [])
        assert.deepStrictEqual(yield* indexIds(flaky.backend), ["r1"])
      }))

    flakyTest("retries exhausted: the entry is failed with its attempts; the sweep drains it once the engine is back", { sync: { resyncIntervalMs: 60_000 } }, ({ store, flaky, p }) =>
      Effect.gen(function*() {
        flaky.state.mode = "transient"
        yield* store.insert(Notes, { id: "x1", tenantId: "t1", title: "one", body: "", n: 1 })
        yield* settled
        // Waits 100, 200, 400 ms (3 retries), each capped at 1000 ms.
        yield* advanceUntil(Effect.map(ledger, (entries) => entries[0]?.state === "failed"))
        yield* p.idle
        const [entry] = yield* ledger
        assert.deepStrictEqual([entry!.state, entry!.attempts, entry!.errorKind], ["failed", 4, "transient"])
        assert.strictEqual(flaky.state.failures, 4)
        const stats = yield* Effect.flatMap(Store.Store, (s) => s.find(SearchStats, {}))
        assert.strictEqual(stats[0]!.dropped, 1)
        // Updated twice while drifted: the sweep converges in one pass to the latest row.
        yield* store.update(Notes, "x1", { title: "two" })
        yield* store.update(Notes, "x1", { title: "three" })
        yield* settled
        flaky.state.mode = "up"
        const writesBefore = flaky.state.writes
        yield* advanceUntil(Effect.map(ledger, (entries) => entries.length === 0), "10 seconds")
        yield* p.idle
        const docs = (yield* indexDocs(flaky.backend))
        assert.deepStrictEqual(docs.map((d) => d["title"]), ["three"])
        assert.strictEqual(flaky.state.writes - writesBefore, 1)
      }))

    flakyTest("a row deleted since the failure converges to removal; resync reports scanned, repaired, failed", { sync: { retries: 0 } }, ({ store, flaky, p }) =>
      Effect.gen(function*() {
        yield* store.insert(Notes, { id: "d1", tenantId: "t1", title: "doomed", body: "", n: 1 })
        yield* store.insert(Notes, { id: "d2", tenantId: "t1", title: "kept", body: "", n: 2 })
        yield* settled
        flaky.state.mode = "transient"
        yield* store.update(Notes, "d1", { title: "doomed again" })
        yield* store.update(Notes, "d2", { title: "kept again" })
        yield* store.delete(Notes, "d1")
        yield* settled
        assert.deepStrictEqual((yield* ledger).map((e) => [e.id, e.state, e.attempts]), [["notes:d1", "failed", 2], ["notes:d2", "failed", 1]])
        flaky.state.mode = "up"
        flaky.state.refuse.add("d2")
        assert.deepStrictEqual(yield* p.resync(), { scanned: 2, repaired: 1, failed: 1 })
        assert.deepStrictEqual((yield* ledger).map((e) => [e.id, e.attempts, e.errorKind]), [["notes:d2", 2, "permanent"]])
        flaky.state.refuse.clear()
        assert.deepStrictEqual(yield* p.resync(), { scanned: 1, repaired: 1, failed: 0 })
        assert.deepStrictEqual(yield* indexIds(flaky.backend), ["d2"])
      }))

    flakyTest("a permanent failure (map throws) is recorded at once, never retried", {}, ({ store }) =>
      Effect.gen(function*() {
        yield* store.insert(Notes, { id: "b1", tenantId: "t1", title: "boom", body: "", n: 1 })
        yield* settled
        const [entry] = yield* ledger
        assert.deepStrictEqual([entry!.state, entry!.errorKind, entry!.attempts], ["failed", "permanent", 1])
        assert.match(entry!.lastError, /cannot index boom/)
        yield* TestClock.adjust("10 seconds")
        assert.strictEqual((yield* ledger)[0]!.attempts, 1)
        // A later good version clears the entry.
        yield* store.update(Notes, "b1", { title: "fine" })
        yield* settled
        assert.deepStrictEqual(yield* ledger, [])
      }))

    flakyTest("writes for one row never land out of order: changes during a retry are re-read, not replayed", {}, ({ store, flaky, p }) =>
      Effect.gen(function*() {
        flaky.state.mode = "transient"
        yield* store.insert(Notes, { id: "o1", tenantId: "t1", title: "v1", body: "", n: 1 })
        yield* settled
        flaky.state.mode = "up"
        // The engine is back, but o1 is owned by its retry: v2 and v3 are not written inline.
        yield* store.update(Notes, "o1", { title: "v2" })
        yield* store.update(Notes, "o1", { title: "v3" })
        yield* settled
        assert.deepStrictEqual(yield* indexIds(flaky.backend), [])
        yield* advanceUntil(Effect.map(ledger, (entries) => entries.length === 0))
        yield* p.idle
        const docs = (yield* indexDocs(flaky.backend))
        assert.deepStrictEqual(docs.map((d) => d["title"]), ["v3"])
        assert.deepStrictEqual(yield* ledger, [])
      }))

    flakyTest("reindex walks the table into a fresh index and swaps it in: no orphans, progress reported", { sync: { reindexBatchSize: 7 } }, ({ store, flaky, p }) =>
      Effect.gen(function*() {
        yield* store.insertMany(Notes, Array.from({ length: 30 }, (_, i) => ({ id: `k${String(i).padStart(2, "0")}`, tenantId: "t1", title: `row ${i}`, body: "", n: i })))
        yield* settled
        // Drift behind the plugin's back: orphans in the engine, and rows missing from it.
        yield* flaky.inner.upsert("notes", [{ id: "ghost", tenantId: "t1", title: "orphan" }])
        yield* flaky.inner.remove("notes", ["k03", "k04"])
        const progress: Array<string> = []
        const result = yield* p.reindex("notes", (event) => Effect.sync(() => progress.push(`${event.phase}:${event.done}/${event.total}`)))
        assert.deepStrictEqual(Option.getOrThrow(result), { index: "notes", rows: 30 })
        assert.deepStrictEqual(progress, ["walking:0/30", "walking:7/30", "walking:14/30", "walking:21/30", "walking:28/30", "walking:30/30", "swapping:30/30", "done:30/30"])
        const ids = yield* indexIds(flaky.backend)
        assert.strictEqual(ids.length, 30)
        assert.isFalse(ids.includes("ghost"))
        const stats = yield* store.find(SearchStats, {})
        assert.strictEqual(stats[0]!.lastReindexRows, 30)
      }))

    flakyTest("changes made during a reindex are in the swapped index", { sync: { reindexBatchSize: 5 } }, ({ store, flaky, p }) =>
      Effect.gen(function*() {
        yield* store.insertMany(Notes, Array.from({ length: 20 }, (_, i) => ({ id: `c${String(i).padStart(2, "0")}`, tenantId: "t1", title: `row ${i}`, body: "", n: i })))
        let step = 0
        yield* p.reindex("notes", (event) =>
          event.phase === "walking" && event.done === 10 && step++ === 0
            ? Effect.gen(function*() {
              // c01 was walked already, c15 not yet; c18 deleted; c99 inserted.
              yield* store.update(Notes, "c01", { title: "changed early" })
              yield* store.update(Notes, "c15", { title: "changed late" })
              yield* store.delete(Notes, "c18")
              yield* store.insert(Notes, { id: "c99", tenantId: "t1", title: "new", body: "", n: 99 })
            }).pipe(Effect.orDie)
            : Effect.void)
        yield* settled
        const docs = (yield* indexDocs(flaky.backend))
        const byId = new Map(docs.map((d) => [d.id, d["title"]]))
        assert.strictEqual(byId.get("c01"), "changed early")
        assert.strictEqual(byId.get("c15"), "changed late")
        assert.isFalse(byId.has("c18"))
        assert.strictEqual(byId.get("c99"), "new")
        assert.strictEqual(docs.length, 20)
      }))

    if (client() !== null) {
      flakyTest("on the SQL tiers every change commits with a pending-sync marker, cleared once the index has it; an abandoned marker is repaired by the sweep", { sync: { resyncIntervalMs: 10_000 } }, ({ store, flaky, p }) =>
        Effect.gen(function*() {
          yield* store.insert(Notes, { id: "m1", tenantId: "t1", title: "marked", body: "", n: 1 })
          yield* store.update(Notes, "m1", { title: "marked again" })
          yield* store.insert(Notes, { id: "m2", tenantId: "t1", title: "second", body: "", n: 2 })
          yield* settled
          yield* p.idle
          assert.deepStrictEqual(yield* pending, [])
          // A process that stopped between its commit and the engine's answer leaves its marker, and
          // the engine without the change.
          yield* flaky.inner.remove("notes", ["m2"])
          const now = yield* Clock.currentTimeMillis
          yield* store.insert(SearchPending, { id: "stopped-process:1", tableName: "notes", rowId: "m2", stagedAt: now })
          // Young markers belong to a live listener: left alone.
          yield* TestClock.adjust("10 seconds")
          yield* p.idle
          assert.deepStrictEqual((yield* pending).map((m) => m.id), ["stopped-process:1"])
          yield* advanceUntil(Effect.map(pending, (markers) => markers.length === 0), "10 seconds")
          yield* advanceUntil(Effect.map(ledger, (entries) => entries.length === 0), "10 seconds")
          yield* p.idle
          assert.deepStrictEqual(yield* indexIds(flaky.backend), ["m1", "m2"])
        }))

      it.scoped("acknowledged markers are cleared together and announce nothing; a newer write's marker outlives an older acknowledgement of its row", () => {
        const flaky = flakyBackend()
        const release = Effect.runSync(Deferred.make<void>())
        // The engine answers every write at once except the one titled "late", held until released.
        const held: typeof flaky.backend = {
          ...flaky.backend,
          write: (index, ops) =>
            ops.some((op) => op.doc?.["title"] === "late")
              ? Effect.zipRight(Deferred.await(release), flaky.backend.write!(index, ops))
              : flaky.backend.write!(index, ops)
        }
        const p = plugin(held)
        return Effect.gen(function*() {
          const store = yield* Store.Store
          const tap = yield* ChangeTap.ChangeTap
          const announced: Array<string> = []
          yield* tap.subscribe({ name: "spy", onEvent: (event) => Effect.sync(() => void announced.push(event.table)) })
          const ids = Array.from({ length: 8 }, (_, i) => `b${i}`)
          yield* Effect.forEach(ids, (id, n) => store.insert(Notes, { id, tenantId: "t1", title: "early", body: "", n }), { discard: true })
          // A newer write of b0 whose index write is still in flight when b0's insert is acknowledged.
          yield* store.update(Notes, "b0", { title: "late" })
          yield* advanceUntil(Effect.map(pending, (markers) => markers.length === 1))
          assert.deepStrictEqual((yield* pending).map((m) => m.rowId), ["b0"])
          assert.deepStrictEqual(yield* indexIds(flaky.backend), ids)
          yield* Deferred.succeed(release, undefined)
          yield* advanceUntil(Effect.map(pending, (markers) => markers.length === 0))
          yield* settled
          yield* p.idle
          const docs = (yield* indexDocs(flaky.backend))
          assert.strictEqual(docs.find((doc) => doc.id === "b0")?.["title"], "late")
          // Nothing listens to the marker table: clearing it publishes no change event.
          assert.isFalse(announced.includes(SearchPending.name), announced.join(","))
          assert.strictEqual(announced.filter((table) => table === "notes").length, ids.length + 1)
        }).pipe(Effect.provide(stack(client(), p)))
      })

      const lost = { id: "lost", tenantId: "t1", title: "x", body: "", n: 1 }
      const lostMarker = (title: string, write: (store: StoreShape) => Effect.Effect<unknown, unknown>) =>
        flakyTest(title, {}, ({ store, flaky, p }) =>
          Effect.gen(function*() {
            const sql = yield* Effect.serviceOptional(SqlClient.SqlClient).pipe(Effect.orDie)
            yield* sql`DROP TABLE _fw_search_pending`
            const exit = yield* Effect.exit(write(store))
            assert.isTrue(Exit.isFailure(exit))
            yield* settled
            yield* p.idle
            assert.isTrue(Option.isNone(yield* store.get(Notes, "lost")))
            assert.deepStrictEqual(yield* indexIds(flaky.backend), [])
            // Writes to tables no index mirrors are not concerned.
            yield* store.insert(SearchStats, { id: "other", indexName: "x", replica: "x", synced: 0, removed: 0, dropped: 0, fleet: false, lastReindexAt: null, lastReindexRows: null, seenAt: 0 })
          }))

      lostMarker(
        "a pending-sync marker that cannot be written fails the write: nothing is committed, nothing indexed",
        (store) => store.insert(Notes, lost)
      )

      lostMarker(
        "inside a transaction too, an insert stages its marker: one that cannot be written fails the transaction",
        (store) => store.transaction(store.insert(Notes, lost))
      )

      it.scoped("a drift ledger that cannot be written keeps the change's marker: the failure is logged, and the sweep repairs the row once the ledger is back", () => {
        const flaky = flakyBackend()
        const p = plugin(flaky.backend, { sync: { retries: 0 } })
        const logged: Array<string> = []
        const capture = Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ cause, logLevel, message }) => {
            if (logLevel._tag === "Error" || logLevel._tag === "Warning" || logLevel._tag === "Fatal") logged.push(`${String(message)} ${Cause.pretty(cause)}`)
          })
        )
        return Effect.gen(function*() {
          const store = yield* Store.Store
          const sql = yield* Effect.serviceOptional(SqlClient.SqlClient).pipe(Effect.orDie)
          yield* sql`DROP TABLE _fw_search_drift`
          flaky.state.mode = "transient"
          const written = yield* store.insert(Notes, { id: "kept", tenantId: "t1", title: "x", body: "", n: 1 })
          assert.strictEqual(written.id, "kept")
          yield* settled
          yield* p.idle
          assert.isTrue(logged.some((line) => line.includes("notes row \"kept\"") && line.includes("LedgerWriteFailed")), logged.join("\n"))
          // Said at error level with the trace, and that the row is unprotected until the sweep.
          assert.isTrue(logged.some((line) => /notes row "kept" \(trace \S+\).*unprotected until the repair sweep/.test(line)), logged.join("\n"))
          assert.deepStrictEqual((yield* pending).map((m) => m.rowId), ["kept"])
          // Loud where operators look, at once: the stats count the row as drift, not as 0 / false.
          const [view] = yield* Effect.flatMap(p.running, (running) => running.engine.view)
          assert.deepStrictEqual([view!.pendingDrift, view!.backlog, view!.unprotected, view!.drifted], [1, 1, 1, true])
          yield* SchemaDiffer.apply([SearchDrift]).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)
          flaky.state.mode = "up"
          // Past the marker's abandonment age, and past the 10 minutes @effect/sql-sqlite-node keeps a
          // failed prepare (of the statements that met the dropped table) in its cache.
          yield* TestClock.adjust("11 minutes")
          assert.deepStrictEqual(yield* p.resync(), { scanned: 1, repaired: 1, failed: 0 })
          assert.deepStrictEqual(yield* pending, [])
          assert.deepStrictEqual(yield* ledger, [])
          assert.deepStrictEqual(yield* indexIds(flaky.backend), ["kept"])
        }).pipe(Effect.provide(stack(client(), p)), Effect.provide(capture))
      })
    }

    if (restartable !== null) {
      it.scoped("the memory index is re-seeded from the table at start", () =>
        Effect.gen(function*() {
          const connect = yield* restartable
          yield* Effect.scoped(Effect.gen(function*() {
            const store = yield* Store.Store
            yield* store.insert(Notes, { id: "s1", tenantId: "t1", title: "seeded row", body: "", n: 1 })
          }).pipe(Effect.provide(stack(connect, plugin("memory")))))
          const p = plugin("memory")
          const result = yield* Effect.scoped(search(p, alice, { index: "notes", q: "seeded" }).pipe(Effect.provide(stack(connect, p))))
          assert.deepStrictEqual(result.hits.map((h) => h.doc["id"]), ["s1"])
        }))

      it.scoped("the sql backend keeps its index in the database across a restart", () =>
        Effect.gen(function*() {
          const connect = yield* restartable
          const first = plugin(Sql.backend(connect))
          yield* Effect.scoped(Effect.gen(function*() {
            const store = yield* Store.Store
            yield* store.insert(Notes, { id: "q1", tenantId: "t1", title: "durable words", body: "", n: 1 })
            yield* store.insert(Notes, { id: "q2", tenantId: "t2", title: "durable other", body: "", n: 2 })
            yield* settled
          }).pipe(Effect.provide(stack(connect, first))))
          const second = plugin(Sql.backend(connect))
          const result = yield* Effect.scoped(Effect.gen(function*() {
            const store = yield* Store.Store
            yield* store.delete(Notes, "q2")
            yield* settled
            return yield* search(second, alice, { index: "notes", q: "durble", fuzziness: 1, highlight: { fields: ["title"], preTag: "<b>", postTag: "</b>" } })
          }).pipe(Effect.provide(stack(connect, second))))
          assert.deepStrictEqual(result.hits, [{ doc: { id: "q1", tenantId: "t1", title: "durable words", body: "", n: 1 }, highlights: { title: "<b>durable</b> words" } }])
        }))

      it.scoped("reindexCommand (for `fw search reindex`) reindexes from another process with progress", () =>
        Effect.gen(function*() {
          const connect = yield* restartable
          const serving = plugin(Sql.backend(connect))
          yield* Effect.scoped(Effect.gen(function*() {
            const store = yield* Store.Store
            yield* store.insertMany(Notes, Array.from({ length: 12 }, (_, i) => ({ id: `z${i}`, tenantId: "t1", title: `zeta ${i}`, body: "", n: i })))
          }).pipe(Effect.provide(stack(connect, serving))))
          const offline = plugin(Sql.backend(connect), { sync: { reindexBatchSize: 5 } })
          const offlineStore = Store.layerSql.pipe(Layer.provide(ChangeTap.layerLocal), Layer.provide(connect))
          const progress: Array<number> = []
          const result = yield* reindexCommand([offline], "notes", (event) => Effect.sync(() => progress.push(event.done))).pipe(Effect.provide(offlineStore))
          assert.deepStrictEqual(result, { index: "notes", rows: 12 })
          assert.deepStrictEqual(progress, [0, 5, 10, 12, 12, 12])
          const missing = yield* Effect.either(reindexCommand([offline], "nope").pipe(Effect.provide(offlineStore)))
          assert.match(String(missing._tag === "Left" ? missing.left : ""), /no search index "nope"/)
          const memory = yield* Effect.either(reindexCommand([plugin("memory")], "notes").pipe(Effect.provide(offlineStore)))
          assert.match(String(memory._tag === "Left" ? memory.left : ""), /inspect route/)
        }))

      it.scoped("drift end to end: rows written while the engine is down, a restart midway, then the index equals the table", () =>
        Effect.gen(function*() {
          const connect = yield* restartable
          const flaky = flakyBackend()
          const options = { sync: { retries: 1, resyncIntervalMs: 30_000, resyncBatchSize: 100 } }
          flaky.state.mode = "transient"
          const write = (from: number, to: number) =>
            Effect.gen(function*() {
              const store = yield* Store.Store
              for (let i = from; i < to; i++) {
                const id = `e${String(i).padStart(3, "0")}`
                yield* store.insert(Notes, { id, tenantId: i % 2 === 0 ? "t1" : "t2", title: `title ${i}`, body: "", n: i })
                if (i % 3 === 0) yield* store.update(Notes, id, { title: `updated ${i}` })
                if (i % 5 === 0) yield* store.delete(Notes, id)
              }
            })
          // First process: half the rows, then it stops while retries are pending.
          yield* Effect.scoped(Effect.gen(function*() {
            yield* write(0, ROWS / 2)
            yield* settled
            assert.strictEqual((yield* ledger).length, ROWS / 2)
          }).pipe(Effect.provide(stack(connect, plugin(flaky.backend, options)))))
          // Second process: the rest; the engine comes back; the sweep drains everything.
          const second = plugin(flaky.backend, options)
          yield* Effect.scoped(Effect.gen(function*() {
            yield* write(ROWS / 2, ROWS)
            yield* settled
            const entries = yield* ledger
            assert.strictEqual(entries.length, ROWS)
            flaky.state.mode = "up"
            yield* advanceUntil(Effect.map(ledger, (entries) => entries.length === 0), "10 seconds")
            yield* second.idle
            assert.deepStrictEqual(yield* ledger, [])
            const store = yield* Store.Store
            const rows = yield* store.find(Notes, { orderBy: "id" })
            const docs = (yield* indexDocs(flaky.backend))
              .slice().sort((a, b) => a.id < b.id ? -1 : 1)
            assert.strictEqual(rows.length, ROWS * 4 / 5)
            assert.deepStrictEqual(docs, rows.map((row) => ({ id: row.id, tenantId: row.tenantId, title: row.title, body: row.body, n: row.n })))
          }).pipe(Effect.provide(stack(connect, second))))
        }), ROWS > 200 ? ROWS * 100 : undefined)
    }
  })

suite("memory store", () => null, null)
suite(
  "sqlite",
  () => SqliteClient.layer({ filename: ":memory:" }),
  Effect.sync(() => SqliteClient.layer({ filename: path.join(mkdtempSync(path.join(tmpdir(), "fw-search-")), "search.db") }))
)
if (Pg.serverUrl !== null) {
  suite("postgresql", () => Pg.layerFreshClient, Effect.map(Pg.freshDatabase, (url) => PgClient.layer({ url: Redacted.make(url) })))
} else {
  describe("search plugin: postgresql", () => it("is skipped", () => console.warn(Pg.skipReason)))
}

describe("search plugin: stats", () => {
  it.scoped("counters are buffered and flushed by count or interval; replicas sum under local scope, max under fleet", () => {
    const p = plugin("memory", { sync: { statsFlushIntervalMs: 5000, statsFlushMaxBuffered: 3 } })
    return Effect.gen(function*() {
      const store = yield* Store.Store
      const synced = Effect.map(store.find(SearchStats, { where: { replica: "r1" } }), (rows) => rows[0]?.synced ?? 0)
      const base = yield* synced
      yield* store.insert(Notes, { id: "s1", tenantId: "t1", title: "a", body: "", n: 1 })
      yield* store.insert(Notes, { id: "s2", tenantId: "t1", title: "b", body: "", n: 2 })
      assert.strictEqual(yield* synced, base)
      yield* store.insert(Notes, { id: "s3", tenantId: "t1", title: "c", body: "", n: 3 })
      yield* settled
      yield* p.idle
      assert.strictEqual(yield* synced, base + 3)
      yield* store.insert(Notes, { id: "s4", tenantId: "t1", title: "d", body: "", n: 4 })
      yield* settled
      yield* TestClock.adjust("5 seconds")
      yield* p.idle
      assert.strictEqual(yield* synced, base + 4)
      const running = yield* p.running
      const other = { id: "notes:r2", indexName: "notes", replica: "r2", synced: 10, removed: 0, dropped: 2, fleet: false, lastReindexAt: null, lastReindexRows: null, seenAt: 0 }
      yield* store.upsert(SearchStats, other)
      let [view] = yield* running.engine.view
      assert.deepStrictEqual([view!.synced, view!.dropped, view!.aggregation, view!.replicas], [base + 14, 2, "sum", 2])
      yield* store.upsert(SearchStats, { ...other, fleet: true })
      ;[view] = yield* running.engine.view
      assert.deepStrictEqual([view!.synced, view!.aggregation], [Math.max(base + 4, 10), "max"])
    }).pipe(Effect.provide(stack(null, p)))
  })
})

describe("search plugin: configuration and boot", () => {
  it("refuses queryableFields listing the tenant field, and bad sync options", () => {
    assert.throws(() => searchPlugin({ indexes: { notes: { ...notesIndex, queryableFields: ["tenantId"] } } }), SearchConfigInvalid)
    assert.throws(() => searchPlugin({ indexes: { notes: notesIndex }, sync: { retries: -1 } }), SearchConfigInvalid)
    assert.throws(() => searchPlugin({ indexes: {} }), SearchConfigInvalid)
    assert.throws(() => searchPlugin({ indexes: { notes: { ...notesIndex, tenantField: "" } } }), SearchConfigInvalid)
  })

  it("declares the permissions of 5.4 rule 5, with the engine host", () => {
    const p = searchPlugin({ indexes: { notes: notesIndex }, backend: { engine: "engineA", url: "http://search.internal:8108", apiKey: "k" } })
    assert.deepStrictEqual(p.permissions, ["store:changes:read", "store:write", "inspect:read", "inspect:write", "network:outbound:search.internal:8108"])
    assert.deepStrictEqual(searchPlugin({ indexes: { notes: notesIndex } }).permissions.length, 4)
  })

  it.scoped("memory under NODE_ENV=production without singleProcessMemoryIndex: SearchBackendNotDurable", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Layer.build(stack(null, plugin("memory"))))
      assert.isTrue(Exit.isFailure(exit))
      assert.match(String(Exit.isFailure(exit) ? exit.cause : ""), /SearchBackendNotDurable|not durable/)
      const ok = yield* Effect.exit(Layer.build(stack(null, plugin("memory", { singleProcessMemoryIndex: true }))))
      assert.isTrue(Exit.isSuccess(ok))
    }).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["NODE_ENV", "production"]])))))
})
