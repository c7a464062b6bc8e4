/**
 * `searchPlugin(options)` (spec 2.1, 2.2, 3.1, 3.2, 4.2, 5.4 rule 5, 6 rules 1, 6, 7): mirrors tables
 * into a search backend through the change tap, serves `search.query` scoped to the caller's
 * tenant, records and repairs drift, reindexes, and exposes all of it on the inspect surface.
 */
import type { Scope } from "effect"
import { Config, Deferred, Effect, Layer, Option, Schedule } from "effect"
import { hostname } from "node:os"
import * as Plugin from "../app/Plugin.js"
import * as Procedure from "../app/Procedure.js"
import { Store } from "../kernel/store/Store.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Backend from "./Backend.js"
import { SearchBackendError, SearchBackendNotDurable, searchErrors } from "./Errors.js"
import * as Dashboard from "./dashboard.js"
import * as Inspect from "./inspect.js"
import * as Options from "./Options.js"
import * as Pending from "./Pending.js"
import * as Query from "./Query.js"
import * as Sync from "./Sync.js"
import * as SyncError from "./SyncError.js"
import { searchTables } from "./tables.js"

/** The running state of a started plugin. */
export type Running = Sync.Running

/** The search plugin, with handles for operators, the CLI and tests. */
export interface SearchPlugin extends Plugin.Plugin {
  /** The checked options. */
  readonly indexes: ReadonlyArray<Options.Resolved>
  readonly sync: Options.Sync
  /** The running engine once the plugin started (waits for it; fails if the boot failed). */
  readonly running: Effect.Effect<Running, unknown>
  /** Repairs every ledger entry now. */
  readonly resync: (index?: string) => Effect.Effect<Sync.ResyncReport, unknown>
  /** Reindexes one index; `None` when one is already running. */
  readonly reindex: (
    index: string,
    onProgress?: (progress: Sync.ReindexProgress) => Effect.Effect<void>
  ) => Effect.Effect<Option.Option<{ readonly index: string; readonly rows: number }>, unknown>
  /** Completes when no background retry is pending. */
  readonly idle: Effect.Effect<void>
  /**
   * Completes once every change the listener received so far is in the index, recorded in the
   * drift ledger, or with its retry (after `ChangeTap.settled`: the index is eventually
   * consistent). Immediate when the plugin is not running.
   */
  readonly settled: Effect.Effect<void>
  /**
   * Reindexes one index from a process that does not serve the app (the `fw search reindex`
   * command): builds the backend, walks the table, swaps. Refused for the memory backend, whose
   * index lives in the serving process (use the inspect route there).
   */
  readonly reindexOffline: (
    index: string,
    onProgress?: (progress: Sync.ReindexProgress) => Effect.Effect<void>
  ) => Effect.Effect<{ readonly index: string; readonly rows: number }, unknown, Store>
}

/** The search plugin among an app's plugins, if any. */
export const find = (plugins: ReadonlyArray<Plugin.Plugin>): SearchPlugin | undefined =>
  plugins.find((plugin): plugin is SearchPlugin => "reindexOffline" in plugin && "indexes" in plugin)

/**
 * What `fw search reindex <entry> <index>` runs once it has the app and its store: reindexes
 * `index` with `onProgress` called per page (for a progress bar). Fails with a readable message
 * when the app has no search plugin or no such index.
 */
export const reindexCommand = (
  plugins: ReadonlyArray<Plugin.Plugin>,
  index: string,
  onProgress?: (progress: Sync.ReindexProgress) => Effect.Effect<void>
): Effect.Effect<{ readonly index: string; readonly rows: number }, unknown, Store> => {
  const plugin = find(plugins)
  if (plugin === undefined) return Effect.fail(new Error("the app has no search plugin"))
  if (!plugin.indexes.some((candidate) => candidate.name === index)) {
    return Effect.fail(new Error(`no search index "${index}"; declared: ${plugin.indexes.map((i) => i.name).join(", ")}`))
  }
  return plugin.reindexOffline(index, onProgress)
}

const defaultReplica = Config.string("FW_REPLICA_ID").pipe(
  Config.withDefault(`${hostname()}:${process.pid}`)
)

/**
 * Builds the backend and the sync engine in the current scope, and applies the boot rules of 3.2.
 * `ready` is called as soon as the engine can take changes, before anything is written: a change
 * delivered meanwhile waits for it while holding the tap, so a write here would deadlock.
 */
const boot = (
  factory: Backend.BackendFactory,
  options: Options.Options,
  checked: ReturnType<typeof Options.check>,
  store: StoreShape,
  ready: (running: Running) => Effect.Effect<void>,
  inFlight: Pending.InFlight
): Effect.Effect<void, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const production = (yield* Config.string("NODE_ENV").pipe(Config.withDefault(""))) === "production"
    const singleProcess = options.singleProcessMemoryIndex === true
    if (!factory.durable && production && !singleProcess) return yield* Effect.fail(new SearchBackendNotDurable())
    const backend = yield* factory.make
    for (const index of checked.indexes) if (backend.ensureIndex) yield* backend.ensureIndex(index.spec)
    const replica = options.replicaId ?? (yield* defaultReplica)
    const engine = yield* Sync.make({ backend, store, indexes: checked.indexes, sync: checked.sync, replica, inFlight })
    yield* ready({ backend, engine })
    if (!factory.durable) {
      // The memory index starts empty: seed it from the tables.
      for (const index of checked.indexes) yield* engine.reindex(index.name)
      if (singleProcess) {
        yield* Effect.logInfo(
          `search: memory index re-seeded from ${checked.indexes.length} table(s); singleProcessMemoryIndex declares this the only process serving search`
        )
      }
      yield* engine.flushStats
      yield* engine.checkPeers(singleProcess)
    }
    yield* engine.startSweep
    if (checked.sync.statsFlushIntervalMs > 0) {
      yield* Effect.zipRight(Effect.zipRight(engine.flushStats, engine.publishLag), factory.durable ? Effect.void : engine.checkPeers(singleProcess)).pipe(
        Effect.repeat(Schedule.spaced(checked.sync.statsFlushIntervalMs)),
        Effect.delay(checked.sync.statsFlushIntervalMs),
        Effect.forkScoped
      )
    }
    yield* Effect.addFinalizer(() => engine.flushStats)
  })

/** The search plugin. Throws `SearchConfigInvalid` on a bad declaration. */
export const searchPlugin = (options: Options.Options): SearchPlugin => {
  const checked = Options.check(options)
  const factory = Backend.resolve(options.backend)
  const indexes = new Map(checked.indexes.map((index) => [index.name, index]))
  const allowedEngineParams = new Set([...Query.defaultEngineParams, ...(options.allowedEngineParams ?? [])])
  const name = options.name ?? "search"
  const indexedTables = new Set(checked.indexes.map((index) => index.table.name))
  // Pending-sync markers this process staged and its listener has not handled yet.
  const inFlight: Pending.InFlight = new Map()
  // One start at a time per plugin value: a restart replaces it.
  let started = Effect.runSync(Deferred.make<Running, unknown>())

  const layer = Layer.scopedDiscard(Effect.gen(function*() {
    const store = yield* Store
    const deferred = started
    yield* Effect.addFinalizer(() => Effect.sync(() => {
      if (started === deferred) started = Effect.runSync(Deferred.make<Running, unknown>())
    }))
    // A failed boot fails the changes waiting for it (their writes then fail loudly) instead of hanging them.
    yield* boot(factory, options, checked, store, (running) => Effect.asVoid(Deferred.succeed(deferred, running)), inFlight).pipe(
      Effect.tapErrorCause((cause) => Deferred.failCause(deferred, cause))
    )
  }))

  const running = Effect.suspend(() => Deferred.await(started))
  const unavailable = new SearchBackendError({
    kind: "transient",
    backend: factory.name,
    operation: "query",
    message: "the search plugin has not started"
  })

  const query = Procedure.action("search.query", {
    input: Query.Input,
    output: Query.Output,
    handler: (input, ctx) =>
      Effect.gen(function*() {
        const { index, query } = yield* Query.validate(indexes, allowedEngineParams, input, ctx.subject)
        const current = yield* Effect.flatMap(Deferred.poll(started), (polled) =>
          Option.isSome(polled) ? Effect.mapError(polled.value, () => unavailable) : Effect.fail(unavailable))
        const result = yield* current.backend.query(index.spec.index, query).pipe(
          Effect.catchAll(Query.backendFailure(current.backend.name, index.name, ctx.traceId))
        )
        return {
          hits: result.hits.map((hit) => hit.highlights === undefined ? { doc: hit.doc } : { doc: hit.doc, highlights: hit.highlights }),
          facets: result.facets,
          found: result.found
        }
      })
  })

  const plugin = Plugin.definePlugin({
    name,
    permissions: [
      "store:changes:read",
      "store:write",
      "inspect:read",
      "inspect:write",
      ...factory.hosts.map((host): Plugin.Permission => `network:outbound:${host}`)
    ],
    tables: [...searchTables],
    usesTables: checked.indexes.map((index) => index.table),
    layer,
    // In the writing transaction: a pending-sync marker per change to an indexed table, so no
    // change commits without a durable record that it must reach the index (a marker that cannot
    // be written fails the write). See `Pending`.
    onStageStatements: Pending.stage(indexedTables, inFlight),
    // The memory tier dies with its process, rows and all: a marker there would guard nothing.
    onStageTiers: ["sqlite", "pg"],
    // Off the writer's path: the listener runs on its own fiber, in commit order, so a write never
    // waits for the engine (a slow or failing engine costs writers nothing). The change joins its
    // index's lane and goes out with the lane's next batch. The index is eventually consistent:
    // `ChangeTap.settled` then the plugin's `settled` wait for it (tests, shutdown).
    onChangeEvent: (event) =>
      indexedTables.has(event.table) ? Effect.flatMap(running, (current) => current.engine.onChange(event)) : Effect.void,
    recordChangeFailure: (event, cause) =>
      Effect.flatMap(running, (current) =>
        // A failed ledger write already means the change is lost: the write must fail loudly.
        cause._tag === "Fail" && cause.error instanceof SyncError.LedgerWriteFailed
          ? Effect.fail(cause.error)
          : current.engine.recordEvent(event, "the search listener failed unexpectedly")),
    procedures: [query],
    errors: searchErrors,
    inspectRoutes: Inspect.routes(running),
    dashboardPanel: Dashboard.panel
  })

  return {
    ...plugin,
    indexes: checked.indexes,
    sync: checked.sync,
    running,
    resync: (index) => Effect.flatMap(running, (current) => current.engine.resync(index)),
    reindex: (index, onProgress) => Effect.flatMap(running, (current) => current.engine.reindex(index, onProgress)),
    idle: Effect.flatMap(running, (current) => current.engine.idle).pipe(Effect.ignore),
    settled: Effect.flatMap(Deferred.poll(started), (polled) =>
      Option.isNone(polled) ? Effect.void : Effect.flatMap(Effect.either(polled.value), (current) => current._tag === "Left" ? Effect.void : current.right.engine.drained)),
    reindexOffline: (index, onProgress) =>
      Effect.scoped(Effect.gen(function*() {
        if (!factory.durable) {
          return yield* Effect.fail(new Error("the memory backend's index lives in the serving process: reindex through its inspect route"))
        }
        const store = yield* Store
        const backend = yield* factory.make
        for (const spec of checked.indexes) if (backend.ensureIndex) yield* backend.ensureIndex(spec.spec)
        const replica = options.replicaId ?? (yield* defaultReplica)
        const engine = yield* Sync.make({ backend, store, indexes: checked.indexes, sync: checked.sync, replica })
        const result = yield* engine.reindex(index, onProgress)
        if (Option.isNone(result)) return yield* Effect.fail(new Error(`a reindex of "${index}" is already running`))
        return result.value
      }))
  }
}
