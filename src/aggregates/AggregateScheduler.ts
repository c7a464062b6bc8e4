/**
 * The `AggregateScheduler` service: boots every aggregate (spec 3.7 boot modes), runs its refreshes
 * on the Effect `Clock` (interval, cron with a time zone, hybrid interval + on-change debounce,
 * manual), one at a time per aggregate with extra triggers skipped, and serves reads and metadata.
 *
 * Several replicas on one database: a scheduled trigger is claimed in `_fw_aggregate_meta` (one
 * conditional UPDATE: the slot, i.e. the trigger's epoch ms, must be newer than the last claimed
 * one), so each trigger refreshes once across the fleet; intervals are aligned to multiples of the
 * interval since the epoch so every replica agrees on the slots. An on-change refresh is claimed
 * only if no replica started one after the change committed. Every replica reads the same rows.
 */
import { SqlClient } from "@effect/sql"
import type { Queue } from "effect"
import { PubSub, Scope, Clock, Context, Cron, Effect, Either, Fiber, Layer, Option, Ref, Schema } from "effect"
import { ChangeTap } from "../kernel/changes/ChangeTap.js"
import type { PendingChange } from "../kernel/changes/ChangeTap.js"
import * as Sleep from "../kernel/Sleep.js"
import type { StoreUnavailable } from "../kernel/Errors.js"
import { TableNotDeclared } from "../kernel/Errors.js"
import * as DeclaredTables from "../app/DeclaredTables.js"
import { Store } from "../kernel/store/Store.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import type * as Table from "../kernel/schema/Table.js"
import type * as Aggregate from "./Aggregate.js"
import { Analytics, noop } from "./Analytics.js"
import type { AnalyticsShape } from "./Analytics.js"
import { AggregateBootFailed, AggregateNotFound, AggregateNotReady, AggregateStale } from "./Errors.js"
import * as Incremental from "./Incremental.js"
import * as Storage from "./Storage.js"
import * as Triggers from "./Triggers.js"
import { errorText, mismatch, runBuild } from "./Build.js"
import type { ReadOptions } from "./Read.js"
import { comparable, select } from "./Read.js"
import type { StorageShape } from "./Storage.js"

/** An aggregate's metadata (spec 2.13). */
export interface Meta {
  readonly refreshedAt: Date | null
  readonly rowCount: number
  readonly durationMs: number | null
  readonly lastError: string | null
  readonly nextRefreshAt: Date | null
}

/** What a refresh did: ran and succeeded, ran and failed (rows kept, `lastError` set), or was skipped (one already running, or another replica took the trigger). */
export type Outcome = "refreshed" | "failed" | "skipped"

/** The scheduler. */
export interface AggregateSchedulerShape {
  readonly aggregates: ReadonlyArray<Aggregate.Any>
  /**
   * The rows. An incremental aggregate whose state is not built yet (its first build is running)
   * is waited for, up to `buildWaitMs`: a read never answers from a state that is not built.
   */
  readonly read: (
    name: string,
    options?: ReadOptions
  ) => Effect.Effect<ReadonlyArray<unknown>, AggregateStale | AggregateNotReady | AggregateNotFound | StoreUnavailable>
  readonly meta: (name: string) => Effect.Effect<Meta, AggregateNotFound | StoreUnavailable>
  /** A manual refresh (skipped when one is running). */
  readonly refresh: (name: string) => Effect.Effect<Outcome, AggregateNotFound>
  /**
   * Every trigger's outcome on this replica from now on (for observers and tests: a refresh started
   * by the clock or a change can be awaited without polling).
   */
  readonly outcomes: Effect.Effect<Queue.Dequeue<TriggerOutcome>, never, Scope.Scope>
  /** Completes when every aggregate's boot refresh (background ones included) has finished. */
  readonly booted: Effect.Effect<void>
}

/** What one trigger did. */
export interface TriggerOutcome {
  readonly name: string
  /** `read`: the build a read started for an incremental aggregate not built yet (see `read`). */
  readonly trigger: "boot" | "schedule" | "change" | "manual" | "read"
  readonly outcome: Outcome
  readonly at: number
}

/** The scheduler service tag. */
export class AggregateScheduler extends Context.Tag("@fw/framework/aggregates/AggregateScheduler")<
  AggregateScheduler,
  AggregateSchedulerShape
>() {}

/** Options of the scheduler layers. */
export interface Options {
  /** The app's tables: an incremental `source` named by string is looked up here. */
  readonly tables?: ReadonlyArray<Table.Any>
}


/** How the tier runs incremental maintenance. */
interface Backend {
  readonly storage: StorageShape
  readonly rebuild: (shape: Incremental.Shape, at: number) => Effect.Effect<void, StoreUnavailable>
  readonly deltas:
    /** Memory: a ChangeTap stager applies each transaction's deltas inside it. */
    | { readonly _tag: "stager"; readonly apply: (shape: Incremental.Shape, changes: ReadonlyArray<PendingChange>) => Effect.Effect<void, StoreUnavailable> }
    /**
     * SQL: database triggers maintain every incremental aggregate; `install` makes them exactly
     * the declared ones (creating or replacing only what is missing or changed) and returns the
     * aggregates whose triggers it created or replaced.
     */
    | {
      readonly _tag: "triggers"
      readonly install: (shapes: ReadonlyArray<Incremental.Shape>) => Effect.Effect<ReadonlySet<string>, StoreUnavailable>
    }
}

interface Entry {
  readonly aggregate: Aggregate.Any
  readonly shape: Incremental.Shape | undefined
  readonly lock: Effect.Semaphore
  /** Refreshes finished on this replica (a read waiting for a build tells a finished one from none). */
  readonly attempts: Ref.Ref<number>
  readonly nextAt: Ref.Ref<number | null>
  readonly debounceAt: Ref.Ref<number | null>
}

const make = (
  aggregates: ReadonlyArray<Aggregate.Any>,
  options: Options,
  backend: Backend
): Effect.Effect<AggregateSchedulerShape, AggregateBootFailed | StoreUnavailable | TableNotDeclared, Store | ChangeTap | Scope.Scope> =>
  Effect.gen(function*() {
    const store: StoreShape = yield* Store
    const tap = yield* ChangeTap
    const analytics: AnalyticsShape = Option.getOrElse(yield* Effect.serviceOption(Analytics), () => noop)
    const storage = backend.storage
    const scope = yield* Effect.scope
    const seen = new Set<string>()
    for (const aggregate of aggregates) {
      if (seen.has(aggregate.name)) return yield* Effect.dieMessage(`aggregate "${aggregate.name}" is registered twice`)
      seen.add(aggregate.name)
    }
    const hub = yield* PubSub.unbounded<TriggerOutcome>()
    const boots: Array<Fiber.Fiber<Outcome>> = []
    const entries = new Map<string, Entry>()
    const known = new Set((options.tables ?? []).map((table) => table.name))
    for (const aggregate of aggregates) {
      // The tables it reads that the app does not declare (when the app's tables are given): a
      // misspelt onChange table would subscribe to nothing, silently; an undeclared source would be
      // read from a table SQL never created.
      const policy = aggregate.policy
      const used = [...policy._tag === "hybrid" ? policy.onChange : [], ...aggregate.incremental === undefined ? [] : [aggregate.incremental.source]]
      const unknown = known.size > 0 ? used.find((table) => !known.has(table)) : undefined
      if (unknown !== undefined) return yield* new TableNotDeclared({ table: unknown, usedBy: `aggregate "${aggregate.name}"` })
      entries.set(aggregate.name, {
        aggregate,
        // Throws AggregateDefinitionError at boot for a shape that cannot be maintained.
        shape: aggregate.incremental === undefined ? undefined : Incremental.resolve(aggregate, options.tables ?? []),
        lock: yield* Effect.makeSemaphore(1),
        attempts: yield* Ref.make(0),
        nextAt: yield* Ref.make<number | null>(null),
        debounceAt: yield* Ref.make<number | null>(null)
      })
    }
    // A build reads through the app's declared tables when they are given: an undeclared one fails
    // `TableNotDeclared` (recorded as the refresh's error) on every tier alike.
    const buildStore = known.size > 0 ? DeclaredTables.guard(store, known) : store
    const entryOf = (name: string) => {
      const entry = entries.get(name)
      return entry === undefined ? Effect.fail(new AggregateNotFound({ aggregate: name })) : Effect.succeed(entry)
    }

    /** One refresh, as the system; never fails (a failure is recorded as `lastError`). */
    const perform = (entry: Entry): Effect.Effect<"refreshed" | "failed"> =>
      Effect.gen(function*() {
        const { aggregate } = entry
        const started = yield* Clock.currentTimeMillis
        if (entry.shape !== undefined) {
          const rebuilt = yield* Effect.exit(backend.rebuild(entry.shape, started))
          if (rebuilt._tag === "Success") return "refreshed" as const
          yield* storage.fail(aggregate.name, errorText(rebuilt.cause))
          return "failed" as const
        }
        const built = yield* Effect.exit(Subject.asSystem(runBuild(aggregate, { store: buildStore, analytics })))
        const outcome = Either.gen(function*() {
          if (built._tag === "Failure") return yield* Either.left(errorText(built.cause))
          const rows = built.value
          if (!Array.isArray(rows)) return yield* Either.left("build did not return a list of rows")
          const encoded: Array<{ key: string; row: unknown }> = []
          for (let i = 0; i < rows.length; i++) {
            const decoded = Schema.decodeUnknownEither(aggregate.output)(rows[i])
            if (Either.isLeft(decoded)) return yield* Either.left(mismatch(i, decoded.left))
            const row = Schema.encodeEither(aggregate.output)(decoded.right)
            if (Either.isLeft(row)) return yield* Either.left(mismatch(i, row.left))
            let key = ""
            if (aggregate.strategy === "merge") {
              const value = (decoded.right as Record<string, unknown>)[aggregate.mergeKey!]
              if (value === undefined || value === null) {
                return yield* Either.left(`mergeKey "${aggregate.mergeKey}" is missing on row[${i}]`)
              }
              key = JSON.stringify(comparable(value))
            }
            encoded.push({ key, row: row.right })
          }
          return encoded
        })
        const finished = yield* Clock.currentTimeMillis
        if (Either.isLeft(outcome)) {
          yield* Effect.logWarning(`aggregate "${aggregate.name}" refresh failed: ${outcome.left}`)
          yield* storage.fail(aggregate.name, outcome.left)
          return "failed" as const
        }
        if (aggregate.strategy === "merge") yield* storage.merge(aggregate.name, outcome.right, started, finished - started)
        else yield* storage.replace(aggregate.name, outcome.right.map((r) => r.row), started, finished - started)
        return "refreshed" as const
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.zipRight(
            Effect.logWarning(`aggregate "${entry.aggregate.name}" refresh could not be stored`, cause),
            Effect.ignore(storage.fail(entry.aggregate.name, errorText(cause))).pipe(Effect.as("failed" as const))
          )
        ),
        Effect.ensuring(Ref.update(entry.attempts, (n) => n + 1))
      )

    const publish = (entry: Entry, kind: TriggerOutcome["trigger"]) => (outcome: Outcome) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => PubSub.publish(hub, { name: entry.aggregate.name, trigger: kind, outcome, at }))

    /** Runs a refresh unless one is running here; `claim` decides across replicas for scheduled triggers. */
    const trigger = (entry: Entry, kind: TriggerOutcome["trigger"], claim?: Effect.Effect<boolean, StoreUnavailable>): Effect.Effect<Outcome> =>
      entry.lock.withPermitsIfAvailable(1)(
        claim === undefined ? perform(entry) : Effect.flatMap(
          claim.pipe(Effect.catchAll((error) => Effect.as(Effect.logWarning(`aggregate "${entry.aggregate.name}": claim failed`, error), false))),
          (claimed): Effect.Effect<Outcome> => claimed ? perform(entry) : Effect.succeed("skipped")
        )
      ).pipe(Effect.map(Option.getOrElse((): Outcome => "skipped")), Effect.tap(publish(entry, kind)))

    /**
     * The boot build, forked with the lock taken first: a read arriving before the build has
     * started waits for it instead of starting one of its own.
     */
    const bootBuild = (entry: Entry) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          entry.lock.take(1),
          Effect.forkIn(restore(perform(entry)).pipe(Effect.ensuring(entry.lock.release(1)), Effect.tap(publish(entry, "boot"))), scope)
        )
      )

    /**
     * Scheduled triggers: the next slot, claimed across replicas. The first slot is set before the
     * loop is forked and each next one before its trigger runs, so `nextRefreshAt` is never empty
     * for a scheduled aggregate (a forked fiber may wait behind a long build to start).
     */
    const scheduleLoop = (entry: Entry, nextSlot: (now: number) => number) =>
      Effect.gen(function*() {
        let slot = nextSlot(yield* Clock.currentTimeMillis)
        yield* Ref.set(entry.nextAt, slot)
        const tick = Effect.gen(function*() {
          // In steps a timer can hold: a 30-day interval or a monthly cron slot is further away than
          // Effect's live clock can wait in one sleep.
          yield* Sleep.sleepUntil(slot)
          const fired = slot
          slot = nextSlot(Math.max(yield* Clock.currentTimeMillis, fired))
          yield* Ref.set(entry.nextAt, slot)
          yield* Effect.fork(trigger(entry, "schedule", storage.claimSlot(entry.aggregate.name, fired)))
        })
        yield* Effect.forkIn(Effect.forever(tick), scope)
      })

    const start = (entry: Entry) =>
      Effect.gen(function*() {
        const { aggregate } = entry
        const name = aggregate.name
        yield* storage.ensure(name)
        // Declared indexes cover the stored output rows of a scheduled aggregate; an incremental
        // aggregate stores groups (its rows are made by toRow at read), so it has none.
        if (entry.shape === undefined) yield* storage.indexes(name, aggregate.indexes)
        if (entry.shape !== undefined && backend.deltas._tag === "stager") {
          const shape = entry.shape
          const apply = backend.deltas.apply
          // Applied inside the writing transaction, so a delta commits exactly once with its write.
          yield* tap.addStager({
            name: `aggregate:${name}`,
            stage: (changes) => {
              const mine = changes.filter((change) => change.table === shape.table.name)
              return mine.length === 0 ? Effect.void : apply(shape, mine)
            }
          })
        }
        const meta = yield* storage.meta(name)
        if (aggregate.bootRefresh === "async") yield* storage.reset(name)
        if (aggregate.bootRefresh === "sync") {
          const outcome = yield* trigger(entry, "boot")
          if (outcome === "failed") {
            const failed = yield* storage.meta(name)
            return yield* new AggregateBootFailed({ aggregate: name, reason: failed.lastError ?? "failed" })
          }
        } else if (!(entry.shape !== undefined && aggregate.bootRefresh === "persistent" && meta.ready)) {
          // An incremental aggregate whose state is ready was kept exact by every write: nothing to redo.
          boots.push(yield* bootBuild(entry))
        }
        const policy = aggregate.policy
        if (policy._tag === "interval" || policy._tag === "hybrid") {
          yield* scheduleLoop(entry, (now) => (Math.floor(now / policy.ms) + 1) * policy.ms)
        } else if (policy._tag === "cron") {
          yield* scheduleLoop(entry, (now) => Cron.next(policy.cron, new Date(now)).getTime())
        }
        if (policy._tag === "hybrid") {
          const watched = new Set(policy.onChange)
          // A trailing debounce: each change pushes the deadline back; one timer fiber waits for it.
          let timer = false
          let changeAt = 0
          const wait: Effect.Effect<void> = Effect.gen(function*() {
            const deadline = yield* Ref.get(entry.debounceAt)
            const now = yield* Clock.currentTimeMillis
            if (deadline === null) {
              timer = false
              return
            }
            if (now < deadline) return yield* Effect.zipRight(Sleep.sleepUntil(deadline), wait)
            yield* Ref.set(entry.debounceAt, null)
            timer = false
            yield* trigger(entry, "change", storage.claimChange(name, changeAt, now))
          })
          yield* tap.subscribe({
            name: `aggregate:${name}:onChange`,
            // Arming the debounce is a Ref write: done on the writer's fiber, so it starts at the write.
            inline: true,
            onEvent: (event) =>
              watched.has(event.table)
                ? Effect.gen(function*() {
                  const now = yield* Clock.currentTimeMillis
                  changeAt = Math.max(changeAt, event.at)
                  yield* Ref.set(entry.debounceAt, now + policy.debounceMs)
                  if (!timer) {
                    timer = true
                    yield* Effect.forkIn(wait, scope)
                  }
                })
                : Effect.void
          }).pipe(Scope.extend(scope))
        }
      })

    if (backend.deltas._tag === "triggers") {
      const installed = yield* backend.deltas.install([...entries.values()].flatMap((entry) => entry.shape === undefined ? [] : [entry.shape]))
      // New or changed triggers: any stored state was kept under another definition (or missed
      // writes while the triggers were absent), so it is forgotten and rebuilt by the boot refresh.
      for (const name of installed) yield* storage.reset(name)
    }
    for (const entry of entries.values()) yield* start(entry)

    /**
     * An incremental aggregate's state once built: waits for the build running here (the boot's),
     * or runs one when none is (a boot build that failed, a state reset by another replica). A
     * build that finished (and failed) while this read waited is this read's answer: reads do not
     * start builds back to back. The build runs in the scheduler's scope, so a read that gives up
     * does not cut it short.
     */
    const built = (entry: Entry, waitMs: number) =>
      Effect.gen(function*() {
        const name = entry.aggregate.name
        const before = yield* Ref.get(entry.attempts)
        const build = entry.lock.withPermits(1)(Effect.gen(function*() {
          const meta = yield* storage.meta(name)
          if (meta.ready || (yield* Ref.get(entry.attempts)) !== before) return meta
          yield* Effect.flatMap(perform(entry), publish(entry, "read"))
          return yield* storage.meta(name)
        }))
        const fiber = yield* Effect.forkIn(build, scope)
        const meta = yield* Fiber.join(fiber).pipe(Effect.timeoutFail({
          duration: waitMs,
          onTimeout: () => new AggregateNotReady({ aggregate: name, reason: `its build did not finish within ${waitMs} ms` })
        }))
        if (!meta.ready) return yield* new AggregateNotReady({ aggregate: name, reason: meta.lastError ?? "its build did not complete" })
        return meta
      })

    const read = (name: string, options: ReadOptions = {}) =>
      Effect.gen(function*() {
        const entry = yield* entryOf(name)
        let meta = yield* storage.meta(name)
        if (entry.shape !== undefined && !meta.ready) {
          const wait = options.buildWaitMs
          meta = yield* built(entry, wait !== undefined && wait >= 0 ? wait : 30_000)
        }
        if (options.maxAgeMs !== undefined && !(entry.shape !== undefined && meta.ready)) {
          const now = yield* Clock.currentTimeMillis
          if (meta.refreshedAt === null || now - meta.refreshedAt > options.maxAgeMs) {
            return yield* new AggregateStale({ aggregate: name, refreshedAt: meta.refreshedAt, maxAgeMs: options.maxAgeMs })
          }
        }
        let rows: ReadonlyArray<unknown>
        if (entry.shape !== undefined) {
          const shape = entry.shape
          const toRow = entry.aggregate.incremental!.toRow
          rows = Incremental.visible(shape, yield* storage.groups(name)).map((g) =>
            toRow({ group: Incremental.normalGroup(shape, g.group), value: Incremental.valueOfGroup(shape.op, g) })
          )
        } else {
          const decode = Schema.decodeUnknownEither(entry.aggregate.output)
          const decoded: Array<unknown> = []
          for (const row of yield* storage.rows(name)) {
            const one = decode(row)
            if (Either.isRight(one)) decoded.push(one.right)
          }
          rows = decoded
        }
        return select(rows, options)
      })

    const metaOf = (name: string) =>
      Effect.gen(function*() {
        const entry = yield* entryOf(name)
        const stored = yield* storage.meta(name)
        const next = [yield* Ref.get(entry.nextAt), yield* Ref.get(entry.debounceAt)].filter((t): t is number => t !== null)
        let rowCount = stored.rowCount
        if (entry.shape !== undefined) rowCount = stored.ready ? Incremental.visible(entry.shape, yield* storage.groups(name)).length : 0
        return {
          refreshedAt: stored.refreshedAt === null ? null : new Date(stored.refreshedAt),
          rowCount,
          durationMs: stored.durationMs,
          lastError: stored.lastError,
          nextRefreshAt: next.length === 0 ? null : new Date(Math.min(...next))
        } satisfies Meta
      })

    return {
      aggregates,
      read,
      meta: metaOf,
      refresh: (name) => Effect.flatMap(entryOf(name), (entry) => trigger(entry, "manual")),
      outcomes: PubSub.subscribe(hub),
      booted: Effect.asVoid(Fiber.awaitAll(boots))
    }
  })


/** The scheduler on in-process storage. Needs the app's Store and ChangeTap. */
export const layerMemory = (
  aggregates: ReadonlyArray<Aggregate.Any>,
  options: Options = {}
): Layer.Layer<AggregateScheduler, AggregateBootFailed | StoreUnavailable | TableNotDeclared, Store | ChangeTap> =>
  Layer.scoped(
    AggregateScheduler,
    Effect.gen(function*() {
      const store = yield* Store
      const storage = Storage.makeMemory()
      const rescan = Incremental.rescanStore(store)
      return yield* make(aggregates, options, {
        storage,
        rebuild: (shape, at) => Incremental.rebuildStore(store, storage, shape, at),
        deltas: { _tag: "stager", apply: (shape, changes) => Incremental.applyChanges(storage, shape, rescan, changes) }
      })
    })
  )

/**
 * The scheduler on the SQL store's database (`_fw_aggregate_meta`, `_fw_aggregate_rows`, created by
 * the schema differ: include `tables` of this area in the applied tables).
 */
export const layerSql = (
  aggregates: ReadonlyArray<Aggregate.Any>,
  options: Options = {}
): Layer.Layer<AggregateScheduler, AggregateBootFailed | StoreUnavailable | TableNotDeclared, Store | ChangeTap | SqlClient.SqlClient> =>
  Layer.scoped(
    AggregateScheduler,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const storage = yield* Storage.makeSql
      return yield* make(aggregates, options, {
        storage,
        rebuild: (shape, at) => Effect.provideService(Incremental.rebuildSql(storage, shape, at), SqlClient.SqlClient, sql),
        deltas: { _tag: "triggers", install: (shapes) => Effect.provideService(Triggers.installAll(shapes), SqlClient.SqlClient, sql) }
      })
    })
  )
