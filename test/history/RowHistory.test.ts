import { FetchHttpClient } from "@effect/platform"
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Layer, Redacted, Schema, type Scope, TestClock } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as PluginHost from "../../src/server/PluginHost.js"
import { rowAsOf, rowHistory, rowHistoryPlugin, RowHistory, sweep } from "../../src/history/index.js"
import type { Options, RowHistoryPlugin } from "../../src/history/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Provenance from "../../src/kernel/changes/Provenance.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"

const Docs = defineTable("docs", {
  fields: { tenantId: Schema.String, title: Schema.String, secret: Schema.optional(Schema.String) },
  tenantField: "tenantId"
})
const Scratch = defineTable("scratch", { fields: { value: Schema.Number } })
const Internal = defineTable("_fw_internal", { fields: { value: Schema.Number } })
const tables = [Docs, Scratch, Internal, RowHistory]

type Client = Layer.Layer<SqlClient.SqlClient, unknown>

const batchedPlugin = rowHistoryPlugin({ mode: "batched", batchSize: 16 })

/** A store on `client` (or in memory) with the history plugin running. */
const stack = (client: Client | null, options: Options | RowHistoryPlugin = {}) => {
  const tier = client === null
    ? Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
    : Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables)).pipe(Layer.provideMerge(client)))
    )
  const plugin = "drain" in options ? options : rowHistoryPlugin(options)
  return Layer.scopedDiscard(PluginHost.start(plugin)).pipe(
    Layer.provideMerge(tier),
    Layer.provide(FetchHttpClient.layer)
  )
}

const acme = Subject.make({ type: "user", id: "alice", tenantId: "acme" })

const suite = (name: string, client: () => Client | null, restartable: Effect.Effect<Client, never, Scope.Scope> | null) =>
  describe(`row history: ${name}`, () => {
    it.scoped("insert, three updates, delete, re-insert: versions 1–6, and the row as of each instant", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* TestClock.setTime(1_000)
        yield* store.insert(Docs, { id: "d1", tenantId: "acme", title: "v1" })
        for (const [i, title] of ["v2", "v3", "v4"].entries()) {
          yield* TestClock.setTime(2_000 + i * 1_000)
          yield* store.update(Docs, "d1", { title })
        }
        yield* TestClock.setTime(5_000)
        yield* store.delete(Docs, "d1")
        yield* TestClock.setTime(6_000)
        yield* store.insert(Docs, { id: "d1", tenantId: "acme", title: "again" })
        const versions = yield* rowHistory(store, Docs, "d1", "acme")
        assert.deepStrictEqual(versions.map((v) => [v.version, v.op, v.data?.title ?? null, v.changedAt]), [
          [1, "insert", "v1", 1_000],
          [2, "update", "v2", 2_000],
          [3, "update", "v3", 3_000],
          [4, "update", "v4", 4_000],
          [5, "delete", null, 5_000],
          [6, "insert", "again", 6_000]
        ])
        const titleAt = (at: number) => Effect.map(rowAsOf(store, Docs, "d1", "acme", at), (row) => row?.title ?? null)
        assert.deepStrictEqual(
          yield* Effect.all([999, 1_000, 1_500, 2_500, 3_999, 4_000, 5_000, 5_500, 6_000, 9_999].map(titleAt)),
          [null, "v1", "v1", "v2", "v3", "v4", null, null, "again", "again"]
        )
      }).pipe(Effect.provide(stack(client()))))

    it.scoped("a rolled-back write leaves no version; provenance is recorded", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* Effect.either(store.transaction(Effect.zipRight(store.insert(Docs, { id: "gone", tenantId: "acme", title: "x" }), Effect.fail("no"))))
        assert.deepStrictEqual(yield* rowHistory(store, Docs, "gone", null), [])
        yield* store.insert(Docs, { id: "d2", tenantId: "acme", title: "x" }).pipe(
          Subject.actingAs(acme),
          Provenance.withProvenance({ traceId: "trace-9", subjectId: "alice", procedure: "docs.add" })
        )
        const [first] = yield* rowHistory(store, Docs, "d2", null)
        assert.deepStrictEqual(
          [first?.tenantId, first?.traceId, first?.subjectId, first?.procedure],
          ["acme", "trace-9", "alice", "docs.add"]
        )
      }).pipe(Effect.provide(stack(client()))))

    it.scoped("include/exclude narrow the tables; framework tables are never recorded", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Docs, { id: "d", tenantId: "acme", title: "x" })
        yield* store.insert(Scratch, { id: "s", value: 1 })
        yield* store.insert(Internal, { id: "i", value: 1 })
        assert.strictEqual((yield* rowHistory(store, Docs, "d", null)).length, 1)
        assert.strictEqual((yield* rowHistory(store, Scratch, "s", null)).length, 0)
        assert.strictEqual((yield* rowHistory(store, Internal, "i", null)).length, 0)
      }).pipe(Effect.provide(stack(client(), { exclude: ["scratch"] }))))

    it.scoped("include records only the tables it names (never a framework table, even named)", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Docs, { id: "d", tenantId: "acme", title: "x" })
        yield* store.update(Docs, "d", { title: "y" })
        yield* store.insert(Scratch, { id: "s", value: 1 })
        yield* store.insert(Internal, { id: "i", value: 1 })
        assert.deepStrictEqual((yield* rowHistory(store, Docs, "d", null)).map((v) => v.data?.title), ["x", "y"])
        assert.strictEqual((yield* rowHistory(store, Scratch, "s", null)).length, 0)
        assert.strictEqual((yield* rowHistory(store, Internal, "i", null)).length, 0)
      }).pipe(Effect.provide(stack(client(), { include: ["docs", "_fw_internal"] }))))

    it.scoped("a tenant that does not own the row sees nothing", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Docs, { id: "d", tenantId: "acme", title: "x" })
        assert.strictEqual((yield* rowHistory(store, Docs, "d", "globex")).length, 0)
        assert.isNull(yield* rowAsOf(store, Docs, "d", "globex", Number.MAX_SAFE_INTEGER))
        const globex = Subject.make({ type: "user", id: "bob", tenantId: "globex" })
        assert.strictEqual((yield* rowHistory(store, Docs, "d", null).pipe(Subject.actingAs(globex))).length, 0)
        assert.strictEqual((yield* rowHistory(store, Docs, "d", null).pipe(Subject.actingAs(acme))).length, 1)
      }).pipe(Effect.provide(stack(client()))))

    it.scoped("a row moved to another tenant by system code leaves the old tenant's rowAsOf(now) at once", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Docs, { id: "moved", tenantId: "acme", title: "x" })
        const before = yield* Clock.currentTimeMillis
        yield* TestClock.adjust("1 second")
        yield* store.update(Docs, "moved", { tenantId: "globex" })
        const now = Number.MAX_SAFE_INTEGER
        assert.isNull(yield* rowAsOf(store, Docs, "moved", "acme", now))
        assert.strictEqual((yield* rowAsOf(store, Docs, "moved", "globex", now))?.tenantId, "globex")
        const globex = Subject.make({ type: "user", id: "bob", tenantId: "globex" })
        assert.isNull(yield* rowAsOf(store, Docs, "moved", null, now).pipe(Subject.actingAs(acme)))
        assert.strictEqual((yield* rowAsOf(store, Docs, "moved", null, now).pipe(Subject.actingAs(globex)))?.tenantId, "globex")
        assert.isNull(yield* rowAsOf(store, Docs, "moved", "acme", now).pipe(Subject.actingAs(globex)))
        // Before the move it was acme's.
        assert.strictEqual((yield* rowAsOf(store, Docs, "moved", "acme", before))?.tenantId, "acme")
      }).pipe(Effect.provide(stack(client()))))

    it.scoped("concurrent updates of one row give gapless versions without duplicates", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Docs, { id: "hot", tenantId: "acme", title: "0" })
        yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) => store.update(Docs, "hot", { title: String(i + 1) }), {
          concurrency: "unbounded"
        })
        const versions = (yield* rowHistory(store, Docs, "hot", null)).map((v) => v.version)
        assert.deepStrictEqual(versions, Array.from({ length: 21 }, (_, i) => i + 1))
      }).pipe(Effect.provide(stack(client()))))

    it.scoped("excluded columns are not stored; retention keeps the newest versions", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Docs, { id: "d", tenantId: "acme", title: "a", secret: "hunter2" })
        for (const title of ["b", "c", "d"]) yield* store.update(Docs, "d", { title })
        const stored = yield* rowHistory(store, Docs, "d", null)
        assert.isTrue(stored.every((v) => v.data !== undefined && !("secret" in v.data)))
        assert.strictEqual(yield* sweep({ keepVersions: 2 }), 2)
        assert.deepStrictEqual((yield* rowHistory(store, Docs, "d", null)).map((v) => v.version), [3, 4])
        yield* TestClock.setTime(100_000)
        yield* store.update(Docs, "d", { title: "e" })
        assert.strictEqual(yield* sweep({ maxAgeMs: 50_000 }), 2)
        assert.deepStrictEqual((yield* rowHistory(store, Docs, "d", null)).map((v) => v.version), [5])
      }).pipe(Effect.provide(stack(client(), { excludeColumns: { docs: ["secret"] } }))))

    it.scoped("two sweeps at once (two replicas) both finish, and keep the newest versions", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        for (const id of ["p", "q", "r"]) {
          yield* store.insert(Docs, { id, tenantId: "acme", title: "a", secret: "s" })
          for (const title of ["b", "c", "d", "e"]) yield* store.update(Docs, id, { title })
        }
        yield* Effect.all([sweep({ keepVersions: 1 }), sweep({ keepVersions: 1 })], { concurrency: 2 })
        for (const id of ["p", "q", "r"]) {
          assert.deepStrictEqual((yield* rowHistory(store, Docs, id, null)).map((v) => v.version), [5])
        }
      }).pipe(Effect.provide(stack(client()))))

    it.scoped("the retention sweep runs in the background on its interval", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Docs, { id: "d", tenantId: "acme", title: "a" })
        for (const title of ["b", "c"]) yield* store.update(Docs, "d", { title })
        assert.strictEqual((yield* rowHistory(store, Docs, "d", null)).length, 3)
        yield* TestClock.adjust("1 minute")
        // The sweep runs on its own fiber: give the event loop turns until its deletes are visible.
        const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
        let versions = yield* rowHistory(store, Docs, "d", null)
        for (let turn = 0; turn < 500 && versions.length > 1; turn++) {
          yield* nextTurn
          versions = yield* rowHistory(store, Docs, "d", null)
        }
        assert.deepStrictEqual(versions.map((v) => v.version), [3])
      }).pipe(Effect.provide(stack(client(), { keepVersions: 1, sweepIntervalMs: 60_000 }))))

    it.scoped("batched mode records the same gapless versions off the writer's path", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insert(Docs, { id: "b", tenantId: "acme", title: "0" })
        yield* Effect.forEach(Array.from({ length: 30 }, (_, i) => i), (i) => store.update(Docs, "b", { title: String(i + 1) }), {
          concurrency: 8
        })
        yield* store.delete(Docs, "b")
        yield* store.insertMany(Docs, Array.from({ length: 50 }, (_, i) => ({ id: `many-${i}`, tenantId: "acme", title: "x" })))
        yield* batchedPlugin.drain
        const versions = yield* rowHistory(store, Docs, "b", null)
        assert.deepStrictEqual(versions.map((v) => v.version), Array.from({ length: 32 }, (_, i) => i + 1))
        assert.strictEqual(versions[31]!.op, "delete")
        assert.strictEqual((yield* rowHistory(store, Docs, "many-49", null)).length, 1)
      }).pipe(Effect.provide(stack(client(), batchedPlugin))))

    if (restartable !== null) {
      it.scoped("history survives a restart", () =>
        Effect.gen(function*() {
          const connect = yield* restartable
          yield* Effect.scoped(Effect.gen(function*() {
            const store = yield* Store.Store
            yield* store.insert(Docs, { id: "kept", tenantId: "acme", title: "1" })
            yield* store.update(Docs, "kept", { title: "2" })
          }).pipe(Effect.provide(stack(connect))))
          const versions = yield* Effect.scoped(Effect.gen(function*() {
            const store = yield* Store.Store
            yield* store.update(Docs, "kept", { title: "3" })
            return yield* rowHistory(store, Docs, "kept", null)
          }).pipe(Effect.provide(stack(connect))))
          assert.deepStrictEqual(versions.map((v) => [v.version, v.data?.title]), [[1, "1"], [2, "2"], [3, "3"]])
        }))
    }
  })

suite("memory", () => null, null)
suite(
  "sqlite",
  () => SqliteClient.layer({ filename: ":memory:" }),
  Effect.sync(() => SqliteClient.layer({ filename: path.join(mkdtempSync(path.join(tmpdir(), "fw-history-")), "history.db") }))
)
if (Pg.serverUrl !== null) {
  suite("postgresql", () => Pg.layerFreshClient, Effect.map(Pg.freshDatabase, (url) => PgClient.layer({ url: Redacted.make(url) })))
} else {
  describe("row history: postgresql", () => it("is skipped", () => console.warn(Pg.skipReason)))
}
