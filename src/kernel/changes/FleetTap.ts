/**
 * FleetTap: the fleet change scope on PostgreSQL — the outbox, its catch-up reads by snapshot
 * visibility, the LISTEN that wakes them, and the coalesced announcements. `ChangeTap.layerFleet`
 * serves it as the change tap.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Scope } from "effect"
import { Effect, Queue, Schedule } from "effect"
import * as DdlLock from "../schema/DdlLock.js"
import * as FusedStage from "../store/FusedStage.js"
import * as Delivery from "./Delivery.js"
import type { ChangeTapShape, PendingChange } from "./Delivery.js"
import { StoreUnavailable } from "../Errors.js"
import * as ListenWatchdog from "../drivers/pg/ListenWatchdog.js"
import * as PgDirect from "../drivers/pg/PgDirect.js"
import * as PgSession from "../drivers/pg/PgSession.js"

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
  /**
   * Coalescing window (default 10 ms): after an announcement starts this replica waits this long
   * before sending the next one, and after a catch-up read starts it waits this long before
   * starting the next (one that took longer is followed at once), so that under load a
   * notification and a read each cover the commits of a window instead of one commit each. The
   * first commit after a quiet spell is announced and read at once; under load a change reaches the
   * other replicas up to twice this later. 0 reads and announces back to back. Each replica's
   * reads and announcements cost the same whatever they carry: at saturation, three replicas on
   * two cores spent about a tenth of the machine on them with a 5 ms window (see
   * docs/performance.md).
   */
  readonly coalesceMs?: number
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
 * The catch-up read of one page of `limit` rows: `$1` the reader's origin (its own rows come
 * without their changes), `$2` the snapshot read up to, `$3` the id to read after. Exported for the
 * tests that explain its plan. It is prepared by name on a session that plans it once, without the
 * parameters' values (a generic plan: see `PgSession.Options`): with the page size a parameter and
 * the id bound indexable, that plan walked the outbox's primary key from its first row and filtered
 * every row (20,000 rows examined for 55 returned, 2.7 ms a read; 27 ms at 100,000 rows). The size
 * is therefore written in the text, and `id + 0` keeps the id bound off the index. The order is by
 * `id + 0` too: ordered by `id`, an outbox not yet analyzed (a busy fleet's, for its first minute
 * or more) was planned on guesses as walking the primary key in order until the page filled, and
 * each read filtered the whole outbox (50–80 ms a read at 100,000 rows, most of the fleet bench's
 * server time). No index gives this order, so every plan starts from the transaction ids (the `xid`
 * index) and sorts what it found, whatever the values and statistics.
 */
export const pageText = (limit: number) => `SELECT s.snap, o.id, o.xid, o.origin, o.changes
      FROM (SELECT pg_current_snapshot()::text AS snap) s
      LEFT JOIN LATERAL ( -- ordered by the number, not by its text form
        SELECT id::text AS id, xid::text AS xid, origin, CASE WHEN origin = $1 THEN NULL ELSE changes END AS changes
        FROM _fw_change_outbox
        WHERE ((xid >= pg_snapshot_xmax($2::pg_snapshot) AND xid < pg_snapshot_xmax(pg_current_snapshot()))
            OR xid = ANY(ARRAY(SELECT pg_snapshot_xip($2::pg_snapshot))))
          AND NOT pg_visible_in_snapshot(xid, $2::pg_snapshot)
          AND id + 0 > $3::bigint
        ORDER BY _fw_change_outbox.id + 0 LIMIT ${Math.max(1, Math.floor(limit))}
      ) o ON true`

/** The outbox row of a fused insert for each row of `from`: the origin and changes are `value(0)` and `value(1)`. */
const outboxInsert = (from: string, value: (index: number) => string) =>
  `INSERT INTO _fw_change_outbox (origin, changes) SELECT ${value(0)}::text, ${value(1)}::jsonb FROM ${from}`

/**
 * What the tap knows of a write's outbox row: `Staged`, its id and transaction once its statement
 * answered; `Fused`, before that, the highest own id answered when its fused statement was built
 * (the floor `findFused` searches above).
 */
type Tracked =
  | { readonly _tag: "Staged"; readonly id: string; readonly xid: bigint }
  | { readonly _tag: "Fused"; readonly floor: bigint }

/**
 * Where a write's `Tracked` lives: a property of its changes array, which lives exactly as long as
 * the write. Not a `WeakMap` keyed by the array: each entry for a new object takes V8's ephemeron
 * write barrier's slow path and the scavenger's ephemeron work, as `Now` found (two per write here).
 */
const trackedKey: unique symbol = Symbol.for("@fw/framework/FleetTap/tracked")
interface Carrier {
  [trackedKey]?: Tracked
}
const track = (changes: ReadonlyArray<PendingChange>, tracked: Tracked) => void ((changes as Carrier)[trackedKey] = tracked)
const trackedOf = (changes: ReadonlyArray<PendingChange>): Tracked | undefined => (changes as Carrier)[trackedKey]

/**
 * Sleeps on the real timer: the coalescing window bounds a latency of a few milliseconds, and
 * must not stall delivery under a test clock.
 */
const realSleep = (ms: number) =>
  Effect.async<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

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
export const make = (options: FleetOptions = {}): Effect.Effect<ChangeTapShape, SqlError, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    // Asked for as a SqlClient: these declarations name no optional peer (see `PgDirect.clientOf`).
    const pg = yield* PgDirect.clientOf("ChangeTap.layerFleet")
    const { publishRemote, ...delivery } = yield* Delivery.make
    // The outbox row is written on the writing transaction's connection directly (see PgDirect).
    const direct = yield* PgDirect.make(pg, { reserve: false })
    // Reads and announcements run on connections of their own, without the client's per-statement
    // machinery (through the client, with their spans, under a tracer): see PgSession. One each:
    // on one shared connection an announcement sent while a read was under way waited for the read
    // (and a read for an announcement), and every other replica heard of the commit that much later
    // (fleet bench, loaded box: announcements behind a read took 27–51 ms at the median against
    // 4–11 ms for the others, and over half of them were behind a read at 500–1,000 commits/s).
    // Both plan their statements once per connection: the page read's plan is the same whatever
    // the values (see `pageText`), and an announcement's is trivial.
    const session = yield* PgSession.make(pg, { plans: "generic" })
    // Opened on first use: a replica that never writes never opens it.
    const announcer = yield* PgSession.make(pg, { plans: "generic" })
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
    // Own outbox rows whose COMMIT had an unknown outcome, with their changes: delivered here if
    // they show up committed (own rows are read without their changes).
    const unknown = new Map<string, { readonly xid: bigint; readonly changes: ReadonlyArray<PendingChange> }>()
    // The latest own rows read, for a CommitUnknown reported after its row was read: the last
    // 10,000 to 20,000, in two generations. (Evicting the oldest one by one, `delete` of a Set's
    // first value, walked the holes earlier deletes left at its front: 12 µs per write at steady
    // state, 3 % of a writing replica's CPU.)
    const ownReadKept = 10_000
    let ownRead = new Set<string>()
    let ownReadOlder = new Set<string>()
    const rememberOwnRead = (id: string) => {
      ownRead.add(id)
      if (ownRead.size < ownReadKept) return
      ownReadOlder = ownRead
      ownRead = new Set()
    }
    /** Whether own row `id` was read; forgets it (it is then delivered by the caller). */
    const takeOwnRead = (id: string) => ownRead.delete(id) || ownReadOlder.delete(id)

    type Row = {
      readonly snap: string
      readonly id: string | null
      readonly xid: string | null
      readonly origin: string | null
      readonly changes: Array<PendingChange> | null
    }
    // Not visible in `seen` means begun at or after its xmax, or in progress then: asked as those
    // two ranges of the xid index. (`xid >= xmin` read every row written since the oldest
    // transaction open in the whole cluster, any database's, on every read: with a long report
    // or a stuck session elsewhere, each notification scanned the outbox.) A replica's own rows come
    // without their changes: it delivered them at publish, and needs only their ids.
    // The first range is closed above by the statement's own snapshot (`pg_current_snapshot()` is
    // it): no row it can see began later, so nothing is left out, and a closed range is estimated
    // as narrow also without statistics. Open, on a table not yet analyzed (a new outbox, for its
    // first minute or more: autovacuum's pace), it was guessed to hold a third of the rows, and the
    // read walked the whole outbox in id order instead (2 ms of server time per read at 20,000 rows).
    // One text for every read (bound parameters, not a template compiled per read).
    const pageStatement: PgSession.Prepared = { name: "fw_outbox_page", text: pageText(readBatch) }
    const page = (after: string) => session.run<Row>(pageStatement, [origin, seen, after])

    const catchUp = Effect.gen(function*() {

      let after = "0"
      let next: string | undefined
      while (true) {
        const rows = yield* page(after)
        next ??= rows[0]!.snap
        let count = 0
        // The page's changes, in order, handed over in one step: other replicas' as decoded (marked
        // remote in place). Own ones whose COMMIT answered CommitUnknown (rare) are published as
        // recorded, in their place: the other replicas' ones before them first.
        let changes: Array<PendingChange> = []
        for (const row of rows) {
          if (row.id === null) continue
          count++
          after = row.id
          if (read.has(row.id)) continue
          read.set(row.id, BigInt(row.xid!))
          if (row.origin !== origin) {
            for (const change of row.changes!) changes.push(change)
            continue
          }
          const ownUnknown = unknown.get(row.id)
          if (ownUnknown !== undefined) {
            // Our own write whose COMMIT answered CommitUnknown: it did commit.
            unknown.delete(row.id)
            if (changes.length > 0) yield* publishRemote(changes)
            changes = []
            yield* delivery.publish(ownUnknown.changes)
          } else {
            // Possibly read before its writer learnt that the COMMIT's outcome is unknown.
            rememberOwnRead(row.id)
          }
        }
        if (changes.length > 0) yield* publishRemote(changes)
        if (count < readBatch) break
      }
      // The next read starts from the first page's snapshot: rows of later pages that committed
      // after it are read again, and skipped; once visible in `seen` they can no longer come back.
      seen = next
      const snapshot = parseSnapshot(seen)
      for (const [id, xid] of read) if (finishedIn(snapshot, xid)) read.delete(id)
      // Finished and never read: the transaction rolled back after all.
      for (const [id, { xid }] of unknown) if (finishedIn(snapshot, xid)) unknown.delete(id)
    }).pipe(Effect.catchAll((error) => Effect.logWarning("fleet change catch-up failed", error)))

    // Notifications only wake the reader; many arriving during one read, or within the coalescing
    // window after it, cost one more read.
    const coalesceMs = Math.max(0, options.coalesceMs ?? 10)
    // The window counts from the start of a read or an announcement, not from its end: one that
    // took the whole window (a loaded box, a long page) is followed at once by the next, which
    // covers what committed meanwhile; waiting a full window after it added its length to every
    // later change's way to the other replicas, without making them any fewer than one per window.
    const windowed = <E>(step: Effect.Effect<void, E>): Effect.Effect<void, E> =>
      coalesceMs === 0
        ? step
        : Effect.suspend(() => {
          const started = performance.now()
          return Effect.zipRight(
            step,
            Effect.suspend(() => {
              const left = coalesceMs - (performance.now() - started)
              return left >= 1 ? realSleep(left) : Effect.void
            })
          )
        })
    const wake = yield* Queue.sliding<void>(1)
    yield* Effect.forever(Effect.zipRight(Queue.take(wake), windowed(catchUp))).pipe(Effect.forkScoped)

    // LISTEN on a connection of its own, checked by a heartbeat and replaced when it goes deaf
    // (see ListenWatchdog): the layer is ready once the server confirmed the first LISTEN.
    yield* ListenWatchdog.make({
      config: pg.config,
      channel: fleetChannel,
      heartbeat: `alive:${origin}`,
      notify: (payload) => pg`SELECT pg_notify(${fleetChannel}, ${payload})`,
      onPayload: (from) => {
        // Our own commits, and other replicas' heartbeats (and the `ready:` pings of replicas of
        // earlier versions, during a rolling deploy), announce nothing to read.
        if (from === origin || from.startsWith("alive:") || from.startsWith("ready:")) return
        wake.unsafeOffer(undefined)
      },
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
    // Commits during an announcement, or within the window from its start, share the next one.
    const announce = yield* Queue.sliding<void>(1)
    const notifyStatement: PgSession.Prepared = { name: "fw_outbox_announce", text: "SELECT pg_notify($1, $2)" }
    yield* Effect.forever(Effect.zipRight(
      Queue.take(announce),
      windowed(announcer.run(notifyStatement, [fleetChannel, origin]).pipe(
        Effect.catchAll((error) => Effect.logWarning("fleet change announcement failed; the others' reads cover it", error))
      ))
    )).pipe(Effect.forkScoped)

    // A fused statement's outbox id is only known from its answer. The highest own id answered so
    // far is below the id of every statement built after it (sequence order): a lower bound that
    // lets a write whose answer was lost find its row by its change's ref.
    let highestStaged = 0n
    /** Records that `changes` were written as own outbox row `id` of transaction `xid`. */
    const staged = (changes: ReadonlyArray<PendingChange>, id: string, xid: string) => {
      track(changes, { _tag: "Staged", id, xid: BigInt(xid) })
      const number = BigInt(id)
      if (number > highestStaged) highestStaged = number
    }
    const tapScope = yield* Effect.scope
    const byRefText = `SELECT id::text AS id, xid::text AS xid FROM _fw_change_outbox
      WHERE id > $1::bigint AND origin = $2 AND changes->0->>'ref' = $3 LIMIT 1`
    /** How long a fused write with an unknown outcome is looked for (its backend may still be finishing it). */
    const lookForMs = 60_000
    /**
     * A fused write whose answer was lost: found by its ref once committed (then as a staged
     * write with an unknown outcome), looked for until `lookForMs` — not found by then, it rolled back.
     */
    const findFused = (changes: ReadonlyArray<PendingChange>, floor: bigint) =>
      Effect.gen(function*() {
        const deadline = Date.now() + lookForMs
        while (true) {
          const rows = yield* pg.unsafe<{ readonly id: string; readonly xid: string }>(byRefText, [
            floor.toString(),
            origin,
            changes[0]!.ref ?? ""
          ]).pipe(Effect.orElseSucceed(() => []))
          const row = rows[0]
          if (row !== undefined) {
            if (takeOwnRead(row.id)) return yield* delivery.publish(changes)
            unknown.set(row.id, { xid: BigInt(row.xid), changes })
            return yield* Queue.offer(wake, undefined)
          }
          if (Date.now() >= deadline) return
          yield* realSleep(500)
        }
      }).pipe(
        // Called from the writer's uninterruptible region: the search must still stop with the tap.
        Effect.interruptible,
        Effect.forkIn(tapScope),
        Effect.asVoid
      )

    return {
      scope: "fleet",
      stage: (changes) =>
        Effect.gen(function*() {
          const statement = pg<{ readonly id: string; readonly xid: string }>`INSERT INTO _fw_change_outbox (origin, changes)
            VALUES (${origin}, ${JSON.stringify(changes)}) RETURNING id::text AS id, xid::text AS xid`
          const [row] = yield* (direct === undefined ? statement : direct.statement(statement))
          if (row !== undefined) staged(changes, row.id, row.xid)
        }).pipe(Effect.mapError((error) => new StoreUnavailable({ message: `change outbox: ${error.message}` }))),
      fuse: (changes) => {
        track(changes, { _tag: "Fused", floor: highestStaged })
        return {
          key: "fleet:outbox",
          values: [origin, JSON.stringify(changes)],
          statement: (row, value) => `${outboxInsert(row, value)} RETURNING id::text AS id, xid::text AS xid`,
          // A fused insert's changes are its one change, whose id is the row's: it names the row
          // each outbox row was written for (the RETURNING of `INSERT … SELECT` cannot read the
          // rows it selects from).
          statementForRows: (rows, value) =>
            `${outboxInsert(rows, value)} RETURNING id::text AS id, xid::text AS xid, changes->0->>'id' AS "${FusedStage.rowIdColumn}"`,
          onResult: (returned) => staged(changes, String(returned.id), String(returned.xid))
        }
      },
      ...delivery,
      publish: (changes) => Effect.zipRight(delivery.publish(changes), Queue.offer(announce, undefined)),
      commitUnknown: (changes) =>
        Effect.suspend(() => {
          const row = trackedOf(changes)
          if (row === undefined) return Effect.void
          if (row._tag === "Fused") return findFused(changes, row.floor)
          // Already read: it committed, and nothing delivered it here.
          if (takeOwnRead(row.id)) return delivery.publish(changes)
          unknown.set(row.id, { xid: row.xid, changes })
          return Queue.offer(wake, undefined)
        })
    }
  })
