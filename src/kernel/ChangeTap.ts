/**
 * ChangeTap: post-commit change events, delivered in commit order to listeners and queues.
 * `layerLocal`: changes are seen by the writing process only. `layerFleet` (PostgreSQL): changes
 * are also written to an outbox and announced with `pg_notify` inside the transaction, so every
 * replica receives every committed change.
 */
// Type only: `@effect/sql-pg` is an optional peer, loaded when a fleet tap is built (SQLite apps need not install it).
import type { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Scope } from "effect"
import type { Cause } from "effect"
import { Context, Deferred, Effect, Exit, Fiber, FiberId, Layer, PubSub, Queue, Schedule } from "effect"
import type { ChangeEvent } from "./ChangeEvent.js"
import * as DdlLock from "./DdlLock.js"
import { StoreUnavailable } from "./Errors.js"
import type { StoreError } from "./Errors.js"
import * as ListenWatchdog from "./ListenWatchdog.js"
import * as Subject from "./Subject.js"

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

/** The change tap service tag. */
export class ChangeTap extends Context.Tag("@fw/framework/ChangeTap")<ChangeTap, ChangeTapShape>() {}

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
export const makeDelivery = Effect.gen(function*() {
  const hub = yield* PubSub.unbounded<ChangeEvent>()
  const slots = new Map<Queue.Queue<ChangeEvent>, Outstanding>()
  const stagers: Array<Stager> = []
  // Changes handed to listeners and not yet handled, over every listener.
  const pending = new Outstanding()
  let seq = 0

  const handle = (listener: Listener, event: ChangeEvent) =>
    Effect.gen(function*() {
      const traceId = event.provenance.traceId
      for (let attempt = 0;; attempt++) {
        // Listeners are system code: they act across tenants, whoever made the write.
        const outcome = yield* Effect.exit(Subject.asSystem(listener.onEvent(event)))
        if (outcome._tag === "Success") return
        yield* Effect.logWarning(
          `change listener "${listener.name}" failed on ${event.op} ${event.table}/${event.id} (trace ${traceId})`,
          outcome.cause
        )
        if (listener.durable === undefined) return
        const recorded = yield* Effect.exit(Subject.asSystem(listener.durable.recordFailure(event, outcome.cause)))
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
    let handled: Effect.Effect<void, unknown>
    try {
      handled = listener.onEvent(event)
    } catch (defect) {
      // A listener that throws while building its handling fails like one whose effect dies: the write has committed.
      handled = Effect.die(defect)
    }
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
          const fiber = yield* Effect.forkDaemon(handle(listener, event))
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
      const done = Effect.sync(() => {
        outstanding.done(1)
        pending.done(1)
      })
      const run = Effect.forever(Effect.flatMap(Queue.take(queue), (event) => Effect.ensuring(handle(listener, event), done)))
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

  /** Numbers and hands over in one step, so every queue sees commit order. */
  const publish = (changes: ReadonlyArray<PendingChange>) =>
    Effect.flatMap(
      Effect.sync(() => {
        const events = changes.map((change): ChangeEvent => ({ ...change, seq: ++seq }))
        pending.add(events.length * slots.size)
        for (const [queue, outstanding] of slots) {
          outstanding.add(events.length)
          for (const event of events) queue.unsafeOffer(event)
        }
        return events
      }),
      // The inline listeners' turn comes in the step after the hub's, not in a step of its own.
      (events) =>
        inline.length === 0
          ? Effect.asVoid(PubSub.publishAll(hub, events))
          : Effect.flatMap(PubSub.publishAll(hub, events), () => handleInline(events))
    )

  const addStager = (stager: Stager) =>
    Effect.acquireRelease(
      Effect.sync(() => void stagers.push(stager)),
      () => Effect.sync(() => void stagers.splice(stagers.indexOf(stager), 1))
    )

  return {
    publish,
    subscribe,
    addStager,
    stagers: (): ReadonlyArray<Stager> => stagers,
    events: PubSub.subscribe(hub),
    settled: pending.idle
  }
})

/** Local change scope: only the writing process sees its changes. */
export const layerLocal: Layer.Layer<ChangeTap> = Layer.effect(
  ChangeTap,
  Effect.map(makeDelivery, (delivery): ChangeTapShape => ({ scope: "local", stage: () => Effect.void, ...delivery }))
)

/** The PostgreSQL channel fleet scope announces commits on. */
export const fleetChannel = "fw_changes"

/** Options of `layerFleet`. */
export interface FleetOptions {
  /** Outbox rows older than this, by the database's clock, are pruned (default 1 hour). */
  readonly retainMs?: number
  /** A catch-up read runs this often even without a notification (default 5 s). */
  readonly pollMs?: number
  /**
   * How often the LISTEN connection (a connection of its own, not from the pool) is checked with a
   * heartbeat notification sent through the pool (default 10 s). A connection that does not hear it
   * within 2 s (deaf: a half-dead network path, a server gone without closing the socket) or that
   * closed (a PostgreSQL restart, a failover, an idle kill) is dropped without waiting on it, a read
   * runs at once, and a fresh connection LISTENs. See ListenWatchdog.
   */
  readonly listenCheckMs?: number
  /** Most outbox rows one catch-up read returns (default 500); a longer backlog is read in pages. */
  readonly readBatch?: number
}

/** A PostgreSQL snapshot (`xmin:xmax:xip,…`) and whether a transaction id was visible in it. */
export interface Snapshot {
  readonly xmin: bigint
  readonly xmax: bigint
  readonly inProgress: ReadonlySet<bigint>
}

/** Parses the text form of `pg_snapshot`. */
export const parseSnapshot = (text: string): Snapshot => {
  const [xmin = "0", xmax = "0", xip = ""] = text.split(":")
  return { xmin: BigInt(xmin), xmax: BigInt(xmax), inProgress: new Set(xip === "" ? [] : xip.split(",").map(BigInt)) }
}

/** True when `xid` had finished (committed or aborted) when `snapshot` was taken. */
export const finishedIn = (snapshot: Snapshot, xid: bigint) =>
  xid < snapshot.xmin || (xid < snapshot.xmax && !snapshot.inProgress.has(xid))

/**
 * The database's wall clock in milliseconds. Outbox rows are stamped and pruned by it, not by a
 * replica's `Clock`: a replica whose clock runs ahead (skew, or a test clock) would otherwise
 * prune rows other replicas have not read yet.
 */
const databaseNowMs = "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"

/**
 * Fleet change scope on PostgreSQL: each transaction's changes are written as one outbox row,
 * stamped with the writing transaction's id (`pg_current_xact_id()`), and announced with
 * `pg_notify` after commit (coalesced; announcements only wake the readers up).
 *
 * Every replica LISTENs and reads what committed since its last read: the rows whose transaction
 * was not yet visible in the snapshot of that read. Outbox ids are taken at insert, not at commit,
 * so an id watermark would skip a transaction that stalls between its insert and its commit;
 * snapshot visibility does not. A replica's first snapshot is taken as it starts: it receives
 * every change that commits after that, including those of transactions already under way.
 * Other replicas' changes are delivered to the local listeners; its own are delivered at publish.
 */
export const layerFleet = (options: FleetOptions = {}): Layer.Layer<ChangeTap, SqlError, PgClient.PgClient> =>
  Layer.scoped(
    ChangeTap,
    Effect.gen(function*() {
      const { PgClient } = yield* Effect.promise(() => import("@effect/sql-pg"))
      const pg = yield* PgClient.PgClient
      const delivery = yield* makeDelivery
      const origin = crypto.randomUUID()
      const readBatch = Math.max(1, options.readBatch ?? 500)
      // Replicas starting together on a fresh database would race on the DDL (PostgreSQL's
      // CREATE … IF NOT EXISTS is not safe against a concurrent create): one at a time, under a lock.
      yield* DdlLock.withDdlLock(DdlLock.keys.outbox)(Effect.gen(function*() {
        yield* pg`CREATE TABLE IF NOT EXISTS _fw_change_outbox (
          id BIGSERIAL PRIMARY KEY, origin TEXT NOT NULL, changes JSONB NOT NULL,
          created_at BIGINT NOT NULL DEFAULT ${pg.literal(databaseNowMs)},
          xid XID8 NOT NULL DEFAULT pg_current_xact_id())`
        // Outboxes created before the transaction id was recorded gain it (old rows: the ALTER's id).
        // Checked first: ALTER and CREATE INDEX lock the table even when there is nothing to do,
        // and would wait for every transaction writing to it (a replica starting mid-commit).
        const [shape] = yield* pg<{ readonly xid: boolean; readonly stamped: boolean; readonly indexed: boolean }>`SELECT
          EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = '_fw_change_outbox' AND column_name = 'xid'
            AND table_schema = current_schema()) AS xid,
          EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = '_fw_change_outbox' AND column_name = 'created_at'
            AND table_schema = current_schema() AND column_default IS NOT NULL) AS stamped,
          EXISTS (SELECT 1 FROM pg_indexes WHERE indexname = '_fw_change_outbox_xid' AND schemaname = current_schema()) AS indexed`
        if (shape?.xid !== true) {
          yield* pg`ALTER TABLE _fw_change_outbox ADD COLUMN IF NOT EXISTS xid XID8 NOT NULL DEFAULT pg_current_xact_id()`
        }
        // Outboxes whose rows were stamped with the writer's clock gain the database's.
        if (shape?.stamped !== true) {
          yield* pg`ALTER TABLE _fw_change_outbox ALTER COLUMN created_at SET DEFAULT ${pg.literal(databaseNowMs)}`
        }
        if (shape?.indexed !== true) yield* pg`CREATE INDEX IF NOT EXISTS _fw_change_outbox_xid ON _fw_change_outbox (xid)`
      })).pipe(Effect.provideService(SqlClient.SqlClient, pg))
      const [first] = yield* pg<{ readonly snap: string }>`SELECT pg_current_snapshot()::text AS snap`
      // Everything visible in `seen` has been read (or predates this replica).
      let seen = first!.snap
      // Rows read that were not visible in `seen` (a page read after it): skipped when read again.
      const read = new Map<string, bigint>()
      // The outbox row of each transaction this replica staged (dropped with its changes array).
      const staged = new WeakMap<ReadonlyArray<PendingChange>, { readonly id: string; readonly xid: bigint }>()
      // Own outbox rows whose COMMIT had an unknown outcome: delivered here if they show up committed.
      const unknown = new Map<string, bigint>()
      // The latest own rows read (bounded), for a CommitUnknown reported after its row was read.
      const ownRead = new Set<string>()
      const ownReadKept = 10_000

      type Row = {
        readonly snap: string
        readonly id: string | null
        readonly xid: string | null
        readonly origin: string | null
        readonly changes: ReadonlyArray<PendingChange> | null
      }
      // Not visible in `seen` means begun at or after its xmax, or in progress then: asked as those
      // two ranges of the xid index. (`xid >= xmin` read every row written since the oldest
      // transaction open in the whole cluster, any database's, on every read: with a long report
      // or a stuck session elsewhere, each notification scanned the outbox.)
      const page = (after: string) =>
        pg<Row>`SELECT s.snap, o.id, o.xid, o.origin, o.changes
          FROM (SELECT pg_current_snapshot()::text AS snap) s
          LEFT JOIN LATERAL ( -- ordered by the number, not by its text form

            SELECT id::text AS id, xid::text AS xid, origin, changes FROM _fw_change_outbox
            WHERE (xid >= pg_snapshot_xmax(${seen}::pg_snapshot) OR xid = ANY(ARRAY(SELECT pg_snapshot_xip(${seen}::pg_snapshot))))
              AND NOT pg_visible_in_snapshot(xid, ${seen}::pg_snapshot)
              AND id > ${after}::bigint
            ORDER BY _fw_change_outbox.id LIMIT ${readBatch}
          ) o ON true`

      const catchUp = Effect.gen(function*() {

        let after = "0"
        let next: string | undefined
        while (true) {
          const rows = yield* page(after)
          next ??= rows[0]!.snap
          let count = 0
          for (const row of rows) {
            if (row.id === null) continue
            count++
            after = row.id
            if (read.has(row.id)) continue
            read.set(row.id, BigInt(row.xid!))
            if (row.origin !== origin) {
              yield* delivery.publish(row.changes!.map((change) => ({ ...change, remote: true })))
            } else if (unknown.delete(row.id)) {
              // Our own write whose COMMIT answered CommitUnknown: it did commit.
              yield* delivery.publish(row.changes!)
            } else {
              // Possibly read before its writer learnt that the COMMIT's outcome is unknown.
              ownRead.add(row.id)
              if (ownRead.size > ownReadKept) ownRead.delete(ownRead.values().next().value!)
            }
          }
          if (count < readBatch) break
        }
        // The next read starts from the first page's snapshot: rows of later pages that committed
        // after it are read again, and skipped; once visible in `seen` they can no longer come back.
        seen = next
        const snapshot = parseSnapshot(seen)
        for (const [id, xid] of read) if (finishedIn(snapshot, xid)) read.delete(id)
        // Finished and never read: the transaction rolled back after all.
        for (const [id, xid] of unknown) if (finishedIn(snapshot, xid)) unknown.delete(id)
      }).pipe(Effect.catchAll((error) => Effect.logWarning("fleet change catch-up failed", error)))

      // Notifications only wake the reader; many arriving during one read cost one more read.
      const wake = yield* Queue.sliding<void>(1)
      yield* Effect.forever(Effect.zipRight(Queue.take(wake), catchUp)).pipe(Effect.forkScoped)

      // LISTEN on a connection of its own, checked by a heartbeat and replaced when it goes deaf
      // (see ListenWatchdog): the layer is ready once the server confirmed the first LISTEN.
      yield* ListenWatchdog.make({
        config: pg.config,
        channel: fleetChannel,
        heartbeat: `alive:${origin}`,
        notify: (payload) => pg`SELECT pg_notify(${fleetChannel}, ${payload})`,
        onPayload: (from) =>
          // Our own commits, and other replicas' heartbeats (and the `ready:` pings of replicas of
          // earlier versions, during a rolling deploy), announce nothing to read.
          from === origin || from.startsWith("alive:") || from.startsWith("ready:")
            ? Effect.void
            : Queue.offer(wake, undefined),
        onMissed: Queue.offer(wake, undefined),
        checkMs: options.listenCheckMs ?? 10_000
      })
      // A commit between the first snapshot and LISTEN announced itself to no one: read now.
      yield* Queue.offer(wake, undefined)
      yield* Queue.offer(wake, undefined).pipe(Effect.repeat(Schedule.spaced(options.pollMs ?? 5_000)), Effect.forkScoped)
      const retainMs = options.retainMs ?? 3_600_000
      yield* pg`DELETE FROM _fw_change_outbox WHERE created_at < ${pg.literal(databaseNowMs)} - ${retainMs}`.pipe(Effect.ignore, Effect.repeat(Schedule.spaced(Math.max(1_000, retainMs / 4))), Effect.forkScoped)

      // The announcement is sent after commit, outside the transaction, coalesced: PostgreSQL
      // serialises the commits of transactions that NOTIFY (a database-wide lock held through the
      // commit's WAL flush), which capped the fleet at one commit per flush. A replica that dies
      // between its commit and the announcement is covered by the others' periodic reads.
      const announce = yield* Queue.sliding<void>(1)
      yield* Effect.forever(Effect.zipRight(
        Queue.take(announce),
        pg`SELECT pg_notify(${fleetChannel}, ${origin})`.pipe(
          Effect.catchAll((error) => Effect.logWarning("fleet change announcement failed; the others' reads cover it", error))
        )
      )).pipe(Effect.forkScoped)

      return ChangeTap.of({
        scope: "fleet",
        stage: (changes) =>
          Effect.gen(function*() {
            const [row] = yield* pg<{ readonly id: string; readonly xid: string }>`INSERT INTO _fw_change_outbox (origin, changes)
              VALUES (${origin}, ${JSON.stringify(changes)}) RETURNING id::text AS id, xid::text AS xid`
            if (row !== undefined) staged.set(changes, { id: row.id, xid: BigInt(row.xid) })
          }).pipe(Effect.mapError((error) => new StoreUnavailable({ message: `change outbox: ${error.message}` }))),
        ...delivery,
        publish: (changes) => Effect.zipRight(delivery.publish(changes), Queue.offer(announce, undefined)),
        commitUnknown: (changes) =>
          Effect.suspend(() => {
            const row = staged.get(changes)
            if (row === undefined) return Effect.void
            // Already read: it committed, and nothing delivered it here.
            if (ownRead.delete(row.id)) return delivery.publish(changes)
            unknown.set(row.id, row.xid)
            return Queue.offer(wake, undefined)
          })
      })
    })
  )
