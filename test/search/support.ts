/**
 * Test support for the search plugin: a backend that can be told to fail, a table, and a stack of
 * store tier + change tap + the plugin started as the server starts it.
 */
import { FetchHttpClient, Headers } from "@effect/platform"
import type { SqlClient } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import * as PluginHost from "../../src/server/PluginHost.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import type { Subject } from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import { SearchBackendError } from "../../src/search/Errors.js"
import * as Memory from "../../src/search/Memory.js"
import type { BackendOption } from "../../src/search/Backend.js"
import type { Options } from "../../src/search/Options.js"
import { searchIndex } from "../../src/search/Options.js"
import type { SearchQueryInput } from "../../src/search/index.js"
import type { SearchBackendShape } from "../../src/search/SearchBackend.js"
import type { SearchPlugin } from "../../src/search/SearchPlugin.js"
import { searchPlugin } from "../../src/search/SearchPlugin.js"
import { searchTables } from "../../src/search/tables.js"

export const Notes = defineTable("notes", {
  fields: { tenantId: Schema.String, title: Schema.String, body: Schema.String, n: Schema.Number },
  tenantField: "tenantId"
})

/** The notes index; `map` throws for a title of "boom". */
export const notesIndex = searchIndex(Notes, {
  index: "notes",
  tenantField: "tenantId",
  queryableFields: ["title", "n", "secretish"],
  map: (row) => {
    if (row.title === "boom") throw new Error("cannot index boom")
    return { id: row.id, tenantId: row.tenantId, title: row.title, body: row.body, n: row.n }
  }
})

/** A memory engine that fails on command, standing in for an external engine (durable: it outlives restarts). */
export const flakyBackend = () => {
  const inner = Memory.make()
  const state = {
    mode: "up" as "up" | "transient" | "permanent",
    writes: 0,
    failures: 0,
    /** Rows whose documents the engine refuses (permanently). */
    refuse: new Set<string>()
  }
  const gate = (operation: string, ids: ReadonlyArray<string>) =>
    Effect.suspend(() => {
      if (state.mode !== "up") {
        state.failures++
        return Effect.fail(new SearchBackendError({ kind: state.mode, backend: "flaky", operation, message: `engine ${state.mode === "transient" ? "unavailable" : "refuses"}` }))
      }
      if (ids.some((id) => state.refuse.has(id))) {
        state.failures++
        return Effect.fail(new SearchBackendError({ kind: "permanent", backend: "flaky", operation, message: "document refused", httpStatus: 400 }))
      }
      state.writes++
      return Effect.void
    })
  const backend: SearchBackendShape = {
    ...inner,
    name: "flaky",
    durable: true,
    upsert: (index, docs) => Effect.zipRight(gate("upsert", docs.map((d) => d.id)), inner.upsert(index, docs)),
    remove: (index, ids) => Effect.zipRight(gate("remove", ids), inner.remove(index, ids)),
    // A batch is refused whole when one of its documents is (as engineB's task or a SQL statement).
    write: (index, ops) => Effect.zipRight(gate("write", ops.map((op) => op.id)), inner.write!(index, ops))
  }
  return { backend, state, inner }
}

export type Client = Layer.Layer<SqlClient.SqlClient, unknown>

/** Plugins started by `stack` (`settled` waits for those running). */
const stacked = new Set<SearchPlugin>()

/** Store tier (memory when `client` is null) + local change tap + the plugin started. */
export const stack = (client: Client | null, plugin: SearchPlugin) => {
  stacked.add(plugin)
  const tables = [Notes, ...searchTables]
  const tier = client === null
    ? Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
    : Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply(tables)).pipe(Layer.provideMerge(client)))
    )
  return Layer.scopedDiscard(PluginHost.start(plugin)).pipe(
    Layer.provideMerge(tier),
    Layer.provide(FetchHttpClient.layer)
  )
}

/**
 * Waits until every change committed so far has been handled by the listeners and every search
 * lane has sent its batches: the search listener runs off the writer's path, so the index catches
 * up after the write returns.
 */
export const settled = Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.settled).pipe(
  Effect.zipRight(Effect.suspend(() => Effect.forEach([...stacked], (p) => p.settled, { discard: true })))
)

/** A plugin over `backend` with test-friendly sync options. */
export const plugin = (backend: BackendOption, more: Partial<Options> = {}) =>
  searchPlugin({
    backend,
    indexes: { notes: notesIndex },
    replicaId: "r1",
    ...more,
    sync: { retries: 3, retryBaseDelayMs: 100, retryMaxDelayMs: 1000, resyncIntervalMs: 0, statsFlushIntervalMs: 0, ...more.sync }
  })

/** Calls the plugin's `search.query` handler as `subject`. */
export const search = (p: SearchPlugin, subject: Subject, input: SearchQueryInput) =>
  Effect.flatMap(Store.Store, (store) =>
    p.procedures![0]!.handler(input, { subject, store, headers: Headers.empty, traceId: "test" }) as Effect.Effect<
      { readonly hits: ReadonlyArray<{ readonly doc: Record<string, unknown>; readonly highlights?: Record<string, string> }>; readonly facets: Record<string, Record<string, number>>; readonly found: number },
      unknown
    >)
