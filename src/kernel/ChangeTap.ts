/**
 * ChangeTap: post-commit change events, delivered in commit order to listeners and queues.
 * `layerLocal`: changes are seen by the writing process only. `layerFleet` (PostgreSQL): changes
 * are also written to an outbox and announced with `pg_notify` inside the transaction, so every
 * replica receives every committed change.
 */
import { PgClient } from "@effect/sql-pg"
import type { SqlError } from "@effect/sql/SqlError"
import type { Queue, Scope } from "effect"
import { Cause, Clock, Context, Deferred, Effect, Fiber, FiberRef, Layer, PubSub, Ref, Schedule, Stream } from "effect"
import type { ChangeEvent } from "./ChangeEvent.js"
import { ChangeDeliveryFailed, StoreUnavailable } from "./Errors.js"
import * as Subject from "./Subject.js"

/** A change recorded inside a transaction, before commit gives it a `seq`. */
export type PendingChange = Omit<ChangeEvent, "seq">

/** A subscriber of committed changes. */
export interface Listener {
  /** Used in logs and in `ChangeDeliveryFailed`. */
  readonly name: string
  /** Called once per committed change, in commit order. */
  readonly onEvent: (event: ChangeEvent) => Effect.Effect<void, unknown>
  /**
   * A durable listener must not lose events: when `onEvent` fails, `recordFailure` must record it
   * (for example into a drift ledger). If that fails too, the write that produced the event
   * fails with `ChangeDeliveryFailed` (its data is committed, but the caller is told loudly).
   * An ordinary listener's failure is logged and never affects the write.
   */
  readonly durable?: {
    readonly recordFailure: (event: ChangeEvent, cause: Cause.Cause<unknown>) => Effect.Effect<void, unknown>
  }
}

/** The change tap service. */
export interface ChangeTapShape {
  /** `local`: only the writing process sees its changes; `fleet`: every replica sees every change. */
  readonly scope: "local" | "fleet"
  /**
   * Called by the store inside the outermost transaction, just before commit. Under fleet
   * scope this writes the outbox rows and `pg_notify` on the transaction's connection.
   */
  readonly stage: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void, StoreUnavailable>
  /**
   * Called by the store after the outermost transaction committed: assigns `seq`, delivers to
   * every listener in order. Fails only when a durable listener could not record its failure.
   */
  readonly publish: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void, ChangeDeliveryFailed>
  /** Registers a listener for the lifetime of the scope. */
  readonly subscribe: (listener: Listener) => Effect.Effect<void, never, Scope.Scope>
  /**
   * A queue of every committed change (local ones and, under fleet scope, other replicas' ones),
   * subscribed immediately so nothing committed after this call is missed; unsubscribed with the scope.
   */
  readonly events: Effect.Effect<Queue.Dequeue<ChangeEvent>, never, Scope.Scope>
  /**
   * Registers, for the lifetime of the scope, a hook run inside the writing transaction just
   * before it commits, with the transaction's changes to `hook.tables` (as the system, on the
   * transaction's connection). A hook's failure fails (and rolls back) the write. For work that
   * must commit exactly once with the write, such as incremental aggregates.
   */
  readonly beforeCommit?: (hook: BeforeCommitHook) => Effect.Effect<void, never, Scope.Scope>
  /** True when staging a write to `table` does work (a before-commit hook watches it, or fleet scope). */
  readonly stagesFor?: (table: string) => boolean
}

/** A hook run inside the writing transaction before commit (see `ChangeTapShape.beforeCommit`). */
export interface BeforeCommitHook {
  /** Used in the error a failing hook gives the write. */
  readonly name: string
  /** The tables whose changes the hook receives. */
  readonly tables: ReadonlySet<string>
  readonly run: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void, unknown>
}

/** The change tap service tag. */
export class ChangeTap extends Context.Tag("@fw/framework/ChangeTap")<ChangeTap, ChangeTapShape>() {}

/** True while this fiber delivers events (a listener's own writes are queued, not delivered re-entrantly). */
const delivering = FiberRef.unsafeMake(false)

/** The in-process delivery shared by both layers: ordered, serialised, with listener failure semantics. */
export const makeDelivery = Effect.gen(function*() {
  const listeners = yield* Ref.make<ReadonlyArray<Listener>>([])
  const hub = yield* PubSub.unbounded<ChangeEvent>()
  const lock = yield* Effect.makeSemaphore(1)
  const queued: Array<ChangeEvent> = []
  let seq = 0

  const deliverOne = (event: ChangeEvent) =>
    Effect.gen(function*() {
      yield* PubSub.publish(hub, event)
      const failures: Array<ChangeDeliveryFailed> = []
      for (const listener of yield* Ref.get(listeners)) {
        // Listeners are system code: they act across tenants, whoever made the write.
        const outcome = yield* Effect.exit(Subject.asSystem(listener.onEvent(event)))
        if (outcome._tag === "Success") continue
        const cause = outcome.cause
        yield* Effect.logWarning(`change listener "${listener.name}" failed on ${event.op} ${event.table}/${event.id}`, cause)
        if (listener.durable === undefined) continue
        const recorded = yield* Effect.exit(Subject.asSystem(listener.durable.recordFailure(event, cause)))
        if (recorded._tag === "Failure") {
          yield* Effect.logError(`durable change listener "${listener.name}" could not record its failure: change lost`, recorded.cause)
          failures.push(new ChangeDeliveryFailed({ listener: listener.name, message: Cause.pretty(cause).split("\n")[0] ?? "failed" }))
        }
      }
      return failures
    })

  /** Delivers events (already numbered) in order; listener writes made meanwhile are delivered after them. */
  const drainQueued = Effect.whileLoop({
    while: () => queued.length > 0,
    body: () => deliverOne(queued.shift()!),
    step: () => undefined
  })

  const deliver = (events: ReadonlyArray<ChangeEvent>) =>
    Effect.flatMap(FiberRef.get(delivering), (nested) => {
      if (nested) {
        // A listener's own write: the delivery in progress drains it. A fiber the listener forked
        // may commit after that delivery ended, so a drainer also waits for the lock.
        queued.push(...events)
        return Effect.asVoid(Effect.forkDaemon(lock.withPermits(1)(drainQueued).pipe(Effect.locally(delivering, true))))
      }
      return lock.withPermits(1)(Effect.gen(function*() {
        const failures: Array<ChangeDeliveryFailed> = []
        for (const event of events) failures.push(...(yield* deliverOne(event)))
        yield* drainQueued
        if (failures.length > 0) return yield* Effect.fail(failures[0]!)
      })).pipe(Effect.locally(delivering, true))
    })

  const number = (changes: ReadonlyArray<PendingChange>): ReadonlyArray<ChangeEvent> =>
    changes.map((change) => ({ ...change, seq: ++seq }))

  const subscribe = (listener: Listener) =>
    Effect.acquireRelease(
      Ref.update(listeners, (all) => [...all, listener]),
      () => Ref.update(listeners, (all) => all.filter((l) => l !== listener))
    )

  const hooks: Array<BeforeCommitHook> = []
  const beforeCommit = (hook: BeforeCommitHook) =>
    Effect.acquireRelease(
      Effect.sync(() => void hooks.push(hook)),
      () => Effect.sync(() => void hooks.splice(hooks.indexOf(hook), 1))
    )
  const stagesFor = (table: string) => hooks.some((hook) => hook.tables.has(table))
  /** Runs the hooks watching any of `changes`, in registration order. */
  const runHooks = (changes: ReadonlyArray<PendingChange>): Effect.Effect<void, StoreUnavailable> =>
    hooks.length === 0 ? Effect.void : Effect.forEach([...hooks], (hook) => {
      const mine = changes.filter((change) => hook.tables.has(change.table))
      return mine.length === 0 ? Effect.void : Subject.asSystem(hook.run(mine)).pipe(
        Effect.mapError((error) =>
          error instanceof StoreUnavailable
            ? error
            : new StoreUnavailable({ message: `before-commit hook "${hook.name}": ${error instanceof Error ? error.message : String(error)}` })
        )
      )
    }, { discard: true })

  return { deliver, number, subscribe, events: PubSub.subscribe(hub), beforeCommit, stagesFor, runHooks }
})

/** Local change scope: only the writing process sees its changes. */
export const layerLocal: Layer.Layer<ChangeTap> = Layer.effect(
  ChangeTap,
  Effect.map(makeDelivery, (delivery): ChangeTapShape => ({
    scope: "local",
    stage: delivery.runHooks,
    publish: (changes) => delivery.deliver(delivery.number(changes)),
    subscribe: delivery.subscribe,
    events: delivery.events,
    beforeCommit: delivery.beforeCommit,
    stagesFor: delivery.stagesFor
  }))
)

/** The PostgreSQL channel fleet scope announces commits on. */
export const fleetChannel = "fw_changes"

/** Options of `layerFleet`. */
export interface FleetOptions {
  /** Outbox rows older than this are pruned (default 1 hour). */
  readonly retainMs?: number
  /** A catch-up read runs this often even without a notification (default 5 s). */
  readonly pollMs?: number
  /**
   * How often the LISTEN connection is checked with a ping to itself (default 10 s). A connection
   * that no longer hears it (a PostgreSQL restart, a failover, an idle kill) is replaced.
   */
  readonly listenCheckMs?: number
}

/**
 * Fleet change scope on PostgreSQL: each transaction's changes are written as one outbox row and
 * announced with `pg_notify` on the transaction's connection, so the announcement is delivered only
 * if it commits. Every replica LISTENs, reads outbox rows it has not delivered (catching up after a
 * missed notification) and delivers other replicas' changes to its listeners; its own are delivered
 * locally at publish.
 */
export const layerFleet = (options: FleetOptions = {}): Layer.Layer<ChangeTap, SqlError, PgClient.PgClient> =>
  Layer.scoped(
    ChangeTap,
    Effect.gen(function*() {
      const pg = yield* PgClient.PgClient
      const delivery = yield* makeDelivery
      const origin = crypto.randomUUID()
      yield* pg`CREATE TABLE IF NOT EXISTS _fw_change_outbox (
        id BIGSERIAL PRIMARY KEY, origin TEXT NOT NULL, changes JSONB NOT NULL, created_at BIGINT NOT NULL)`
      const start = yield* pg<{ readonly max: string | null }>`SELECT MAX(id)::text AS max FROM _fw_change_outbox`
      let watermark = Number(start[0]?.max ?? 0)
      // What was committed before this replica started is not news to it (its re-read window
      // would otherwise replay the last rows written before start-up).
      const floor = watermark
      const delivered = new Set<number>()
      const catchUpLock = yield* Effect.makeSemaphore(1)

      // Ids are assigned at insert, not at commit: re-read a window below the watermark so a
      // transaction that committed late is still delivered, and skip what was delivered already.
      const catchUp = catchUpLock.withPermits(1)(Effect.gen(function*() {
        const rows = yield* pg<{ readonly id: string; readonly origin: string; readonly changes: ReadonlyArray<PendingChange> }>`
          SELECT id::text AS id, origin, changes FROM _fw_change_outbox WHERE id > ${Math.max(0, watermark - 100)} ORDER BY id`
        for (const row of rows) {
          const id = Number(row.id)
          if (id <= floor || delivered.has(id)) continue
          delivered.add(id)
          watermark = Math.max(watermark, id)
          if (row.origin !== origin) {
            yield* Effect.ignore(delivery.deliver(delivery.number(row.changes.map((change) => ({ ...change, remote: true })))))
          }
        }
        for (const id of delivered) if (id < watermark - 1000) delivered.delete(id)
      })).pipe(Effect.catchAll((error) => Effect.logWarning("fleet change catch-up failed", error)))

      // LISTEN starts when the stream runs: the layer is ready only once its own ping came back,
      // so no commit after construction can slip between start-up and LISTEN.
      const listening = yield* Deferred.make<void>()
      const ping = `ready:${origin}`
      const heartbeat = `alive:${origin}`
      const heard = yield* Ref.make(0)
      const listen = pg.listen(fleetChannel).pipe(
        Stream.runForEach((from) =>
          from === ping
            ? Deferred.succeed(listening, undefined)
            : from === heartbeat
            ? Ref.update(heard, (n) => n + 1)
            // Our own commits, and other replicas' pings, announce nothing to read.
            : from === origin || from.startsWith("ready:") || from.startsWith("alive:")
            ? Effect.void
            : catchUp
        ),
        Effect.catchAll((error) => Effect.logError("fleet change listener stopped", error))
      )
      const listener = yield* Ref.make(yield* Effect.forkScoped(listen))
      // The pg driver swallows the LISTEN connection's errors, so a dead connection looks like a
      // quiet one: ping it, and replace it (then catch up) when the ping does not come back.
      const checkListener = Effect.gen(function*() {
        const before = yield* Ref.get(heard)
        yield* pg`SELECT pg_notify(${fleetChannel}, ${heartbeat})`
        const answered = yield* Ref.get(heard).pipe(
          Effect.repeat({ until: (n) => n > before, schedule: Schedule.spaced("50 millis") }),
          Effect.timeout("2 seconds"),
          Effect.isSuccess
        )
        if (answered) return
        yield* Effect.logWarning("fleet change listener went deaf; reconnecting")
        yield* Effect.flatMap(Ref.get(listener), (fiber) => Fiber.interrupt(fiber).pipe(Effect.ignore))
        yield* Ref.set(listener, yield* Effect.forkScoped(listen))
        yield* catchUp
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("fleet change listener check failed", cause)))
      yield* pg`SELECT pg_notify(${fleetChannel}, ${ping})`.pipe(
        Effect.zipRight(Deferred.await(listening).pipe(Effect.timeout("100 millis"))),
        Effect.retry({ times: 50 }),
        Effect.catchAll((error) => Effect.logWarning("fleet change listener not confirmed; catch-up polling covers it", error))
      )
      yield* catchUp.pipe(Effect.repeat(Schedule.spaced(options.pollMs ?? 5_000)), Effect.forkScoped)
      yield* Effect.delay(checkListener, options.listenCheckMs ?? 10_000).pipe(Effect.forever, Effect.forkScoped)
      const retainMs = options.retainMs ?? 3_600_000
      yield* Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        yield* pg`DELETE FROM _fw_change_outbox WHERE created_at < ${now - retainMs}`
      }).pipe(Effect.ignore, Effect.repeat(Schedule.spaced(Math.max(1_000, retainMs / 4))), Effect.forkScoped)

      return ChangeTap.of({
        scope: "fleet",
        stage: (changes) =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            const [row] = yield* pg<{ readonly id: string }>`INSERT INTO _fw_change_outbox (origin, changes, created_at)
              VALUES (${origin}, ${JSON.stringify(changes)}, ${now}) RETURNING id::text AS id`
            // Own changes are delivered at publish; the row is marked so catch-up skips it.
            if (row !== undefined) delivered.add(Number(row.id))
            yield* pg`SELECT pg_notify(${fleetChannel}, ${origin})`
          }).pipe(
            Effect.mapError((error) => new StoreUnavailable({ message: `change outbox: ${error.message}` })),
            Effect.zipRight(delivery.runHooks(changes))
          ),
        publish: (changes) => delivery.deliver(delivery.number(changes)),
        subscribe: delivery.subscribe,
        events: delivery.events,
        beforeCommit: delivery.beforeCommit,
        stagesFor: () => true
      })
    })
  )
