/**
 * Delivery: the in-process half of the change tap, shared by the local and the fleet scope —
 * numbering in commit order, and per listener an ordered queue with its own fiber and its own
 * retries. Also the contract both scopes implement (`ChangeTapShape`, re-exported by ChangeTap).
 */
import type { Scope } from "effect"
import type { Cause } from "effect"
import { Chunk, Deferred, Effect, Exit, Fiber, FiberId, PubSub, Queue } from "effect"
import type { ChangeEvent } from "./ChangeEvent.js"
import type { StoreError, StoreUnavailable } from "../Errors.js"
import type * as FusedStage from "../store/FusedStage.js"
import type * as StageStatements from "../store/StageStatements.js"
import * as Subject from "../Subject.js"

/** A change recorded inside a transaction, before commit gives it a `seq`. */
export type PendingChange = Omit<ChangeEvent, "seq">

/** A subscriber of committed changes. */
export interface Listener {
  /** Used in logs. */
  readonly name: string
  /**
   * Called once per committed change, in commit order, on the listener's own fiber: a slow
   * listener delays neither the others nor the writer.
   */
  readonly onEvent: (event: ChangeEvent) => Effect.Effect<void, unknown>
  /**
   * A durable listener must not lose events: when `onEvent` fails, `recordFailure` must record it
   * (for example into a drift ledger). If that fails too, both are retried (backing off to once
   * every 30 s) until one succeeds; the listener's later events wait, in order. The write that
   * produced the event has committed and already answered success.
   * An ordinary listener's failure is logged and the event skipped.
   */
  /**
   * Handled on the writer's fiber, after commit and before the write returns, instead of on the
   * listener's own fiber: for cheap in-memory bookkeeping that callers read right after their write
   * (counters). Its failure is logged and never fails the write; a durable inline listener then
   * goes on in the background as a durable listener would (retried until handled or recorded), an
   * ordinary one skips the event. A slow inline listener delays its writers. Concurrent writers'
   * events may reach it interleaved.
   */
  readonly inline?: boolean
  readonly durable?: {
    readonly recordFailure: (event: ChangeEvent, cause: Cause.Cause<unknown>) => Effect.Effect<void, unknown>
  }
}

/**
 * Work done inside the writing transaction, after its writes and under their row locks, just
 * before commit (row history assigns versions here). A failure rolls the write back. Store writes
 * a stager makes join the transaction and are not change events themselves.
 */
export interface Stager {
  readonly name: string
  readonly stage: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void, StoreError>
  /**
   * The same work as store statements (what `stage` runs through the store): with it, a tier that
   * runs a short transaction synchronously (SQLite) can commit a one-row write and its staging in
   * one step. Without it, every staged write takes the client's transaction.
   */
  readonly statements?: (changes: ReadonlyArray<PendingChange>) => StageStatements.Plan<void>
  /**
   * The same work for one inserted row as a part of one PostgreSQL statement (see `FusedStage`):
   * with it, a one-row insert outside a transaction and its staging commit in one round trip.
   * `null`: nothing to write for this change; `undefined`: this change takes the transaction.
   */
  readonly fuse?: (change: PendingChange) => FusedStage.Part | null | undefined
}

/** The change tap service. */
export interface ChangeTapShape {
  /** `local`: only the writing process sees its changes; `fleet`: every replica sees every change. */
  readonly scope: "local" | "fleet"
  /**
   * Called by the store inside the outermost transaction, just before commit (after the stagers).
   * Under fleet scope this writes the outbox row on the transaction's connection.
   */
  readonly stage: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void, StoreUnavailable>
  /**
   * `stage` for a one-row insert as a part of one PostgreSQL statement (see `FusedStage`); without
   * it, a write the tap stages takes the transaction.
   */
  readonly fuse?: (changes: ReadonlyArray<PendingChange>) => FusedStage.Part
  /**
   * Called by the store after the outermost transaction committed: assigns `seq`, hands the
   * changes to `events` queues and to every listener's own queue, and returns without waiting
   * for the listeners. Never fails: the write has committed.
   */
  readonly publish: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void>
  /**
   * Called by the store instead of `publish` when the COMMIT of the transaction that staged
   * `changes` has an unknown outcome (`CommitUnknown`). Under fleet scope the replica then delivers
   * them to itself once its outbox read shows that they did commit (and forgets them if not).
   */
  readonly commitUnknown?: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void>
  /** Registers a listener for the lifetime of the scope. */
  readonly subscribe: (listener: Listener) => Effect.Effect<void, never, Scope.Scope>
  /** Registers a stager for the lifetime of the scope. */
  readonly addStager: (stager: Stager) => Effect.Effect<void, never, Scope.Scope>
  /** The stagers registered now, in registration order. */
  readonly stagers: () => ReadonlyArray<Stager>
  /**
   * A queue of every committed change (local ones and, under fleet scope, other replicas' ones),
   * subscribed immediately so nothing committed after this call is missed; unsubscribed with the scope.
   */
  readonly events: Effect.Effect<Queue.Dequeue<ChangeEvent>, never, Scope.Scope>
  /** Completes once every listener has handled every change published so far (tests, shutdown). */
  readonly settled: Effect.Effect<void>
}

/** The in-process delivery: what both scopes share of `ChangeTapShape`. */
export type Delivery = Pick<ChangeTapShape, "publish" | "subscribe" | "addStager" | "stagers" | "events" | "settled">

/**
 * `publish` for other replicas' changes just decoded from the outbox (objects no one else holds):
 * each is marked `remote: true` and numbered in place, instead of being copied twice.
 */
export type PublishRemote = (changes: Array<PendingChange>) => Effect.Effect<void>

/** Most events a listener's fiber takes from its queue in one step. */
const maxBatch = 512

/** How long a listener's queue may take to empty when its scope closes. */
const drainOnCloseMs = 10_000

/** Sleeps on the real timer: a shutdown bound must hold under a test clock too. */
const realSleep = (ms: number) =>
  Effect.async<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

/**
 * A count of outstanding work, changed synchronously (so a count and the hand-over it counts
 * happen in one step), with a wait for zero that needs no clock.
 */
class Outstanding {
  private n = 0
  private waiters: Array<Deferred.Deferred<void>> = []
  add(k: number) {
    this.n += k
  }
  done(k: number) {
    this.n -= k
    if (this.n > 0) return
    for (const waiter of this.waiters) Deferred.unsafeDone(waiter, Exit.void)
    this.waiters = []
  }
  readonly idle: Effect.Effect<void> = Effect.suspend(() => {
    if (this.n <= 0) return Effect.void
    const waiter = Deferred.unsafeMake<void>(FiberId.none)
    this.waiters.push(waiter)
    return Deferred.await(waiter)
  })
}

/**
 * The in-process delivery shared by both layers: numbering in commit order, and per listener an
 * ordered queue with its own fiber and its own retries.
 */
export const make: Effect.Effect<Delivery & { readonly publishRemote: PublishRemote }> = Effect.gen(function*() {
  const hub = yield* PubSub.unbounded<ChangeEvent>()
  const slots = new Map<Queue.Queue<ChangeEvent>, Outstanding>()
  const stagers: Array<Stager> = []
  // Changes handed to listeners and not yet handled, over every listener.
  const pending = new Outstanding()
  let seq = 0

  /** A listener's handling of `event`; one that throws while building it fails like one whose effect dies. */
  const build = (listener: Listener, event: ChangeEvent): Effect.Effect<void, unknown> => {
    try {
      return listener.onEvent(event)
    } catch (defect) {
      return Effect.die(defect)
    }
  }

  /**
   * Handles `event` (starting from `first`, its handling already built), retrying a durable
   * listener. Run by the caller inside `Subject.asSystem`: listeners are system code, they act
   * across tenants, whoever made the write.
   */
  const handle = (listener: Listener, event: ChangeEvent, first: Effect.Effect<void, unknown>): Effect.Effect<void> =>
    // The common case, a handling that succeeds, costs one step (no loop, no exit value).
    Effect.catchAllCause(first, (cause) => retry(listener, event, cause))

  /** After the first attempt at `event` failed with `cause`: logged, recorded or retried. */
  const retry = (listener: Listener, event: ChangeEvent, firstCause: Cause.Cause<unknown>) =>
    Effect.gen(function*() {
      const traceId = event.provenance.traceId
      for (let attempt = 0;; attempt++) {
        const outcome = attempt === 0 ? Exit.failCause(firstCause) : yield* Effect.exit(build(listener, event))
        if (outcome._tag === "Success") return
        yield* Effect.logWarning(
          `change listener "${listener.name}" failed on ${event.op} ${event.table}/${event.id} (trace ${traceId})`,
          outcome.cause
        )
        if (listener.durable === undefined) return
        const recorded = yield* Effect.exit(listener.durable.recordFailure(event, outcome.cause))
        if (recorded._tag === "Success") return
        yield* Effect.logError(
          `durable change listener "${listener.name}" could not record its failure on ${event.table}/${event.id} (trace ${traceId}); retrying`,
          recorded.cause
        )
        yield* Effect.sleep(Math.min(30_000, 100 * 2 ** Math.min(attempt, 9)))
      }
    })

  const inline: Array<Listener> = []
  // Background retries of durable inline listeners, stopped when their listener is unsubscribed.
  const inlineRetries = new Map<Listener, Set<Fiber.RuntimeFiber<void>>>()
  // Inline handling runs inside one `asSystem` region per published batch, when it has anything to run (see handleInline).
  const handleInlineOne = (listener: Listener, event: ChangeEvent) => {
    // A listener that throws while building its handling fails like one whose effect dies: the write has committed.
    const handled = build(listener, event)
    // The common case of a listener with nothing to do for this event costs no extra step.
    if (handled === Effect.void) return Effect.void
    return listener.durable === undefined
      ? Effect.catchAllCause(handled, (cause) =>
        Effect.logWarning(
          `change listener "${listener.name}" failed on ${event.op} ${event.table}/${event.id} (trace ${event.provenance.traceId})`,
          cause
        ))
      : Effect.flatMap(Effect.exit(handled), (outcome) => {
        if (outcome._tag === "Success") return Effect.void
        const retries = inlineRetries.get(listener)
        if (retries === undefined) return Effect.void
        return Effect.gen(function*() {
          yield* Effect.logWarning(
            `change listener "${listener.name}" failed on ${event.op} ${event.table}/${event.id} (trace ${event.provenance.traceId}); retried in the background`,
            outcome.cause
          )
          // The write has committed: the durable handling goes on without the writer.
          const fiber = yield* Effect.forkDaemon(Subject.asSystem(handle(listener, event, build(listener, event))))
          retries.add(fiber)
          fiber.addObserver(() => retries.delete(fiber))
        })
      })
  }
  /** Called when the batch's turn comes (after it was published to the queues and the hub). */
  const handleInline = (events: ReadonlyArray<ChangeEvent>): Effect.Effect<void> => {
    // Per event, per listener, in order; each event's handling is built when its turn comes (after
    // the previous handling ran), so a listener that counts synchronously sees the changes in order.
    let listeners: ReadonlyArray<Listener> = inline
    const total = events.length * listeners.length
    const from = (index: number, inRegion: boolean): Effect.Effect<void> => {
      for (let i = index; i < total; i++) {
        const handled = handleInlineOne(listeners[i % listeners.length]!, events[Math.floor(i / listeners.length)]!)
        // Nothing to run (a listener that counted synchronously, or ignores the table): no step.
        if (handled === Effect.void) continue
        // Other fibers run from here on, and may subscribe or unsubscribe: the later turns go to the
        // listeners there were (copied only now: most batches never get here).
        if (listeners === inline) listeners = [...inline]
        const rest = i + 1 < total ? Effect.zipRight(handled, Effect.suspend(() => from(i + 1, true))) : handled
        // Listeners are system code: they act across tenants, whoever made the write. One region
        // per published batch, entered only when some handling has an effect to run (entering it
        // copies the fiber's references: a cost per write otherwise).
        return inRegion ? rest : Subject.asSystem(rest)
      }
      return Effect.void
    }
    return from(0, false)
  }

  const subscribe = (listener: Listener) =>
    listener.inline === true
      ? Effect.acquireRelease(
        Effect.sync(() => {
          inline.push(listener)
          inlineRetries.set(listener, new Set())
        }),
        () =>
          Effect.suspend(() => {
            inline.splice(inline.indexOf(listener), 1)
            const retries = inlineRetries.get(listener) ?? new Set()
            inlineRetries.delete(listener)
            return Fiber.interruptAll(retries)
          })
      )
      : Effect.gen(function*() {
      const queue = yield* Queue.unbounded<ChangeEvent>()
      const outstanding = new Outstanding()
      // The events of a batch in order; each one's handling is built when its turn comes (after the
      // previous one ran), and one the listener has nothing to do for costs no step. After an event
      // it handled the fiber yields: a listener is background work, and writers waiting to run (a
      // burst of calls) go first rather than behind a whole batch of, say, index updates.
      const handleFrom = (events: ReadonlyArray<ChangeEvent>, index: number): Effect.Effect<void> => {
        for (let i = index; i < events.length; i++) {
          const event = events[i]!
          const first = build(listener, event)
          if (first === Effect.void) continue
          return Effect.zipRight(handle(listener, event, first), Effect.zipRight(Effect.yieldNow(), Effect.suspend(() => handleFrom(events, i + 1))))
        }
        return Effect.void
      }
      // Whatever is queued is taken and handled in one step, in one system region (entering it
      // copies the fiber's references: once per batch, not per event); counted done as a whole, also
      // when interrupted part way (shutdown).
      const run = Effect.forever(Effect.flatMap(Queue.takeBetween(queue, 1, maxBatch), (batch) => {
        const events = Chunk.toReadonlyArray(batch)
        return Effect.ensuring(
          Subject.asSystem(Effect.suspend(() => handleFrom(events, 0))),
          Effect.sync(() => {
            outstanding.done(events.length)
            pending.done(events.length)
          })
        )
      }))
      const fiber = yield* Effect.forkDaemon(run)
      yield* Effect.addFinalizer(() =>
        Effect.gen(function*() {
          slots.delete(queue)
          // What was committed before the scope closed is still handled, for a while.
          // (Finalizers are uninterruptible: the race's loser must be made interruptible to lose.)
          yield* Effect.interruptible(Effect.race(outstanding.idle, realSleep(drainOnCloseMs)))
          yield* Fiber.interrupt(fiber)
          const left = yield* Queue.takeAll(queue)
          yield* Effect.sync(() => pending.done(left.length))
          if (left.length > 0) {
            yield* Effect.logError(`change listener "${listener.name}" stopped with ${left.length} changes not handled`)
          }
        })
      )
      slots.set(queue, outstanding)
    })

  /** Hands numbered events to every queue (called in the step that numbered them: commit order). */
  const offer = (events: ReadonlyArray<ChangeEvent>) => {
    pending.add(events.length * slots.size)
    for (const [queue, outstanding] of slots) {
      outstanding.add(events.length)
      for (const event of events) queue.unsafeOffer(event)
    }
    return events
  }
  // The inline listeners' turn comes in the step after the hub's, not in a step of its own.
  const toHub = (events: ReadonlyArray<ChangeEvent>) =>
    inline.length === 0
      ? Effect.asVoid(PubSub.publishAll(hub, events))
      : Effect.flatMap(PubSub.publishAll(hub, events), () => handleInline(events))

  /** Numbers and hands over in one step, so every queue sees commit order. */
  const publish = (changes: ReadonlyArray<PendingChange>) =>
    Effect.flatMap(Effect.sync(() => offer(changes.map((change): ChangeEvent => ({ ...change, seq: ++seq })))), toHub)

  const publishRemote: PublishRemote = (changes) =>
    Effect.flatMap(
      Effect.sync(() => {
        for (const change of changes) {
          const event = change as { remote?: boolean; seq?: number }
          event.remote = true
          event.seq = ++seq
        }
        return offer(changes as Array<ChangeEvent>)
      }),
      toHub
    )

  const addStager = (stager: Stager) =>
    Effect.acquireRelease(
      Effect.sync(() => void stagers.push(stager)),
      () => Effect.sync(() => void stagers.splice(stagers.indexOf(stager), 1))
    )

  return {
    publish,
    publishRemote,
    subscribe,
    addStager,
    stagers: (): ReadonlyArray<Stager> => stagers,
    events: PubSub.subscribe(hub),
    settled: pending.idle
  }
})
