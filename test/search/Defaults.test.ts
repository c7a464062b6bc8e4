/**
 * Promises of the spec no other test holds the search plugin to: the default `sync` options
 * (spec 2.2 and 8: every other test passes its own), the warning when a second replica joins a
 * memory index (spec 3.2), and the drift listing's contents and order (spec 7: oldest first, each
 * with its last error and attempt count).
 */
import { FetchHttpClient } from "@effect/platform"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Logger, TestClock } from "effect"
import { defineApp } from "../../src/app/App.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as PluginHost from "../../src/server/PluginHost.js"
import { searchPlugin } from "../../src/search/SearchPlugin.js"
import { SearchDrift, searchTables } from "../../src/search/tables.js"
import { serve } from "../support/Serve.js"
import { Notes, notesIndex } from "./support.js"

// The replica test runs both plugins on one SQLite database, as replicas share their stats table.
const sharedSqlite = Store.layerSql.pipe(
  Layer.provideMerge(ChangeTap.layerLocal),
  Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([Notes, ...searchTables]))),
  Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })),
  Layer.merge(FetchHttpClient.layer),
  Layer.orDie
)

describe("search defaults and promises", () => {
  it.scoped("sync options default to the spec's values, and the engine runs with them", () =>
    Effect.gen(function*() {
      const p = searchPlugin({ backend: "memory", indexes: { notes: notesIndex } })
      assert.deepInclude(p.sync, {
        retries: 5,
        retryBaseDelayMs: 200,
        retryMaxDelayMs: 10_000,
        resyncIntervalMs: 60_000,
        resyncBatchSize: 200,
        reindexBatchSize: 1_000,
        statsFlushIntervalMs: 5_000,
        statsFlushMaxBuffered: 1_000
      })
      yield* PluginHost.start(p)
      const [view] = yield* Effect.flatMap(p.running, (running) => running.engine.view)
      assert.deepStrictEqual(view!.retryPolicy, { retries: 5, retryBaseDelayMs: 200, retryMaxDelayMs: 10_000 })
    }).pipe(Effect.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.merge(FetchHttpClient.layer)))))

  it.scoped("a second replica joining a memory index: it warns that the declaration is false, the first warns plainly", () => {
    const warnings: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel.label === "WARN") warnings.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
    })
    const replica = (replicaId: string, singleProcessMemoryIndex: boolean) =>
      searchPlugin({ backend: "memory", indexes: { notes: notesIndex }, replicaId, singleProcessMemoryIndex })
    const first = replica("r1", false)
    const second = replica("r2", true)
    return Effect.gen(function*() {
      yield* PluginHost.start(first)
      yield* first.running
      yield* first.idle
      assert.deepStrictEqual(warnings, [], "alone: no warning")
      yield* PluginHost.start(second)
      yield* second.running
      const joined = "search: singleProcessMemoryIndex is declared, but another replica serves this app: the declaration is false and each replica's memory index differs"
      for (let i = 0; i < 1_000 && !warnings.includes(joined); i++) yield* Effect.yieldNow()
      assert.deepStrictEqual(warnings, [joined])
      // The first hears of the second at its next stats flush (every statsFlushIntervalMs).
      const plain = "search: several replicas serve this app on the memory backend: each has its own index"
      for (let i = 0; i < 100 && !warnings.includes(plain); i++) {
        yield* TestClock.adjust("1 second")
        yield* Effect.yieldNow()
      }
      assert.deepStrictEqual(warnings, [joined, plain])
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)), Effect.provide(sharedSqlite))
  }, { timeout: 60_000 })

  it.scoped("the drift listing: every entry's index, row, table, state, last error, attempts and instants, oldest first", () => {
    const p = searchPlugin({ backend: "memory", indexes: { notes: notesIndex }, sync: { resyncIntervalMs: 0 } })
    return Effect.gen(function*() {
      const store = yield* Effect.map(Layer.build(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))), Layer.succeedContext)
      const served = yield* serve(defineApp({ tables: [Notes], plugins: [p] }), store)
      const entry = (rowId: string, lastFailedAt: number, state: "retrying" | "failed") => ({
        id: `notes:${rowId}`,
        indexName: "notes",
        rowId,
        tableName: Notes.name,
        state,
        lastError: `engine refused ${rowId}`,
        errorKind: state === "failed" ? "permanent" as const : "transient" as const,
        attempts: state === "failed" ? 1 : 4,
        firstFailedAt: lastFailedAt - 10,
        lastFailedAt
      })
      // Inserted neither in id nor in time order.
      yield* Effect.flatMap(Store.Store, (s) =>
        Effect.forEach([entry("b", 3_000, "failed"), entry("c", 1_000, "retrying"), entry("a", 2_000, "failed")], (row) => s.insert(SearchDrift, row))
      ).pipe(Effect.provide(store))
      const response = yield* Effect.promise(() =>
        fetch(`${served.url}/_fw/inspect/plugins/search/drift`, { headers: { authorization: "Bearer drift-token" } }).then((r) => r.json())
      )
      const listed = (row: ReturnType<typeof entry>) => ({
        index: row.indexName,
        rowId: row.rowId,
        table: row.tableName,
        state: row.state,
        lastError: row.lastError,
        errorKind: row.errorKind,
        attempts: row.attempts,
        firstFailedAt: row.firstFailedAt,
        lastFailedAt: row.lastFailedAt
      })
      assert.deepStrictEqual(response, {
        entries: [listed(entry("c", 1_000, "retrying")), listed(entry("a", 2_000, "failed")), listed(entry("b", 3_000, "failed"))]
      })
    }).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["FW_INSPECT_TOKEN", "drift-token"]]))))
  })
})

