import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import pg from "pg"
import { Clock, Context, Deferred, Effect, Fiber, Layer, Option, Queue, Redacted, Schedule, Schema, TestClock } from "effect"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"

const Notes = defineTable("notes", { fields: { text: Schema.String } })
const Audit = defineTable("audit", { fields: { noteId: Schema.String } })

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const withListener = (listener: ChangeTap.Listener) =>
  Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.subscribe(listener))
const settled = Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.settled)

describe("ChangeTap (local)", () => {
  it.scoped("an ordinary listener's failure is logged and never undoes or fails the write", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      yield* withListener({ name: "flaky", onEvent: () => Effect.fail("down") })
      const row = yield* store.insert(Notes, { text: "kept" })
      assert.isTrue(Option.isSome(yield* store.get(Notes, row.id)))
    }).pipe(Effect.provide(memory)))

  it.scoped("a listener that throws while building its handling skips that event and keeps receiving", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const seen: Array<string> = []
      yield* withListener({
        name: "throws",
        onEvent: (event) => {
          if (event.id === "bad") throw new Error("listener bug")
          return Effect.sync(() => void seen.push(event.id))
        }
      })
      yield* store.insert(Notes, { id: "bad", text: "x" })
      yield* store.insert(Notes, { id: "good", text: "y" })
      yield* settled
      assert.deepStrictEqual(seen, ["good"])
    }).pipe(Effect.provide(memory)))

  it.scoped("a listener's changes come in commit order across a batch, including the ones it ignores", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const seen: Array<string> = []
      yield* withListener({
        name: "odd",
        // Nothing to do for some events (returned as Effect.void): the others still come in order.
        onEvent: (event) => event.id.endsWith("skip") ? Effect.void : Effect.sync(() => void seen.push(event.id))
      })
      yield* store.transaction(Effect.forEach(["a", "b-skip", "c", "d-skip", "e"], (id) => store.insert(Notes, { id, text: id }), { discard: true }))
      yield* settled
      assert.deepStrictEqual(seen, ["a", "c", "e"])
    }).pipe(Effect.provide(memory)))

  it.scoped("a listener working through a batch lets waiting fibers run between the events it handles", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      let handled = 0
      yield* withListener({ name: "indexer", onEvent: () => Effect.sync(() => void handled++) })
      yield* store.transaction(Effect.forEach(Array.from({ length: 10 }, (_, i) => `n${i}`), (id) => store.insert(Notes, { id, text: id }), { discard: true }))
      // Scheduled after the listener's fiber took the batch: it runs between two of its events, not after all ten.
      const seenByWaiter = yield* Fiber.join(yield* Effect.fork(Effect.sync(() => handled)))
      yield* settled
      assert.strictEqual(handled, 10)
      assert.isBelow(seenByWaiter, 10)
    }).pipe(Effect.provide(memory)))

  it.scoped("a durable listener's failure is recorded; the write succeeds", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const recorded: Array<string> = []
      yield* withListener({
        name: "search",
        onEvent: () => Effect.fail("engine down"),
        durable: { recordFailure: (event) => Effect.sync(() => void recorded.push(event.id)) }
      })
      const row = yield* store.insert(Notes, { text: "x" })
      yield* settled
      assert.deepStrictEqual(recorded, [row.id])
    }).pipe(Effect.provide(memory)))

  it.scoped("a committed write answers success while a durable listener that cannot record is retried until it does", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const others: Array<string> = []
      let ledgerUp = false
      const recorded: Array<string> = []
      yield* withListener({
        name: "search",
        onEvent: () => Effect.fail("engine down"),
        durable: {
          recordFailure: (event) => ledgerUp ? Effect.sync(() => void recorded.push(event.id)) : Effect.fail("ledger down")
        }
      })
      yield* withListener({ name: "other", onEvent: (event) => Effect.sync(() => void others.push(event.id)) })
      yield* store.insert(Notes, { id: "n1", text: "x" })
      yield* store.insert(Notes, { id: "n2", text: "y" })
      assert.strictEqual(yield* store.count(Notes), 2)
      // The other listener is not held up by the failing one.
      yield* Effect.iterate(0, { while: () => others.length < 2, body: (n) => Effect.as(Effect.yieldNow(), n + 1) })
      assert.deepStrictEqual(others, ["n1", "n2"])
      assert.deepStrictEqual(recorded, [])
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(recorded, [])
      ledgerUp = true
      yield* TestClock.adjust("1 minute")
      yield* settled
      assert.deepStrictEqual(recorded, ["n1", "n2"])
    }).pipe(Effect.provide(memory)))

  it.scoped("a slow listener delays neither the writer nor the other listeners", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const release = yield* Deferred.make<void>()
      const fast = yield* Queue.unbounded<string>()
      const slow: Array<string> = []
      yield* withListener({
        name: "slow",
        onEvent: (event) => Effect.zipRight(Deferred.await(release), Effect.sync(() => void slow.push(event.id)))
      })
      yield* withListener({ name: "fast", onEvent: (event) => Queue.offer(fast, event.id) })
      for (const id of ["a", "b", "c"]) yield* store.insert(Notes, { id, text: id })
      assert.deepStrictEqual([yield* Queue.take(fast), yield* Queue.take(fast), yield* Queue.take(fast)], ["a", "b", "c"])
      assert.deepStrictEqual(slow, [])
      yield* Deferred.succeed(release, undefined)
      yield* settled
      assert.deepStrictEqual(slow, ["a", "b", "c"])
    }).pipe(Effect.provide(memory)))

  it.scoped("a listener may write; its own changes are delivered after the current ones", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const seen: Array<string> = []
      yield* withListener({
        name: "auditor",
        onEvent: (event) =>
          Effect.gen(function*() {
            seen.push(`${event.table}:${event.op}`)
            if (event.table === "notes") yield* store.insert(Audit, { noteId: event.id })
          })
      })
      yield* store.transaction(Effect.all([store.insert(Notes, { text: "a" }), store.insert(Notes, { text: "b" })]))
      yield* settled
      assert.deepStrictEqual(seen, ["notes:insert", "notes:insert", "audit:insert", "audit:insert"])
      assert.strictEqual(yield* store.count(Audit), 2)
    }).pipe(Effect.provide(memory)))

  it.scoped("a write from a fiber a listener forked is still delivered after that delivery ended", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const audits = yield* Queue.unbounded<string>()
      const release = yield* Deferred.make<void>()
      yield* withListener({
        name: "late-writer",
        onEvent: (event) =>
          event.table === "notes"
            ? Effect.asVoid(Effect.forkDaemon(Effect.zipRight(Deferred.await(release), store.insert(Audit, { noteId: event.id }))))
            : Queue.offer(audits, event.table)
      })
      yield* store.insert(Notes, { text: "a" })
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual(yield* Queue.take(audits), "audit")
    }).pipe(Effect.provide(memory)))

  it.scoped("events queues receive every committed change in order", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const events = yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.events)
      const row = yield* store.insert(Notes, { text: "a" })
      yield* store.update(Notes, row.id, { text: "b" })
      const received = [yield* Queue.take(events), yield* Queue.take(events)]
      assert.deepStrictEqual(received.map((e) => [e.op, e.after?.text]), [["insert", "a"], ["update", "b"]])
      assert.isTrue(received[0]!.seq < received[1]!.seq)
    }).pipe(Effect.provide(memory)))
})

/** The system clock shifted by `ms` (a replica whose clock is wrong). */
const skewed = (ms: number): Clock.Clock => {
  const base = Clock.make()
  const nanos = BigInt(ms) * 1_000_000n
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => base.unsafeCurrentTimeMillis() + ms,
    currentTimeMillis: Effect.sync(() => base.unsafeCurrentTimeMillis() + ms),
    unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos() + nanos,
    currentTimeNanos: Effect.sync(() => base.unsafeCurrentTimeNanos() + nanos),
    sleep: (duration) => base.sleep(duration)
  }
}

describe.skipIf(Pg.serverUrl === null)("ChangeTap (fleet, PostgreSQL)", () => {
  /** One "process": its own PgClient pool, fleet tap and store, on the shared database. */
  const replica = (url: string, options: ChangeTap.FleetOptions = { pollMs: 2_000 }) =>
    Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerFleet(options)),
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) }))
    )

  it.scopedLive("replicas starting together on a fresh database all start (the outbox DDL does not race)", () =>
    Effect.gen(function*() {
      // PostgreSQL's CREATE TABLE IF NOT EXISTS fails ("duplicate key … pg_class_relname_nsp_index")
      // when another session creates the same table at the same moment.
      for (let round = 0; round < 3; round++) {
        const url = yield* Pg.freshDatabase
        const started = yield* Effect.all(
          Array.from({ length: 4 }, () => Effect.exit(Layer.build(replica(url)))),
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(started.map((exit) => exit._tag), ["Success", "Success", "Success", "Success"], `round ${round}`)
      }
    }))

  it.scopedLive("a change committed by one process reaches a second; a rolled-back one never does", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const a = yield* Layer.build(replica(url))
      const b = yield* Layer.build(replica(url))
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(a))
      const received = yield* Queue.unbounded<ChangeEvent>()
      yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) =>
        tap.subscribe({ name: "b", onEvent: (event) => Queue.offer(received, event) })).pipe(Effect.provide(b))
      const storeA = yield* Effect.provide(Store.Store, a)
      yield* Effect.either(storeA.transaction(Effect.zipRight(storeA.insert(Notes, { id: "lost", text: "no" }), Effect.fail("abort"))))
      yield* storeA.insert(Notes, { id: "kept", text: "yes" })
      const first = yield* Queue.take(received).pipe(Effect.timeout("10 seconds"))
      assert.deepStrictEqual([first.op, first.id, first.after?.text], ["insert", "kept", "yes"])
      assert.strictEqual(yield* Queue.size(received), 0)
      // B's own writes are delivered to B once (locally), not a second time through the outbox.
      const storeB = yield* Effect.provide(Store.Store, b)
      yield* storeB.insert(Notes, { id: "fromB", text: "b" })
      const own = yield* Queue.take(received).pipe(Effect.timeout("10 seconds"))
      assert.strictEqual(own.id, "fromB")
      yield* storeA.insert(Notes, { id: "again", text: "a" })
      const next = yield* Queue.take(received).pipe(Effect.timeout("10 seconds"))
      assert.strictEqual(next.id, "again")
    }))

  it.scopedLive("a LISTEN connection the server killed is replaced: changes arrive again without waiting for the poll", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      // Polling every 10 minutes: within the test only LISTEN can deliver.
      const options = { pollMs: 600_000, listenCheckMs: 300 }
      const a = yield* Layer.build(replica(url, options))
      const b = yield* Layer.build(replica(url, options))
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(a))
      const received = yield* Queue.unbounded<ChangeEvent>()
      yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) =>
        tap.subscribe({ name: "b", onEvent: (event) => Queue.offer(received, event) })).pipe(Effect.provide(b))
      const storeA = yield* Effect.provide(Store.Store, a)
      yield* storeA.insert(Notes, { id: "before", text: "x" })
      assert.strictEqual((yield* Queue.take(received).pipe(Effect.timeout("5 seconds"))).id, "before")
      const database = new URL(url).pathname.slice(1)
      yield* Effect.promise(async () => {
        const admin = new pg.Client({ connectionString: Pg.serverUrl! })
        await admin.connect()
        await admin.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'`,
          [database]
        )
        await admin.end()
      })
      yield* Effect.sleep("2 seconds")
      yield* storeA.insert(Notes, { id: "after", text: "y" })
      assert.strictEqual((yield* Queue.take(received).pipe(Effect.timeout("5 seconds"))).id, "after")
    }))

  it.scopedLive("a replica that starts later is not handed what was committed before it started", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const a = yield* Layer.build(replica(url))
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(a))
      const storeA = yield* Effect.provide(Store.Store, a)
      for (let i = 0; i < 5; i++) yield* storeA.insert(Notes, { id: `before${i}`, text: "old" })
      const b = yield* Layer.build(replica(url))
      const received = yield* Queue.unbounded<ChangeEvent>()
      yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) =>
        tap.subscribe({ name: "b", onEvent: (event) => Queue.offer(received, event) })).pipe(Effect.provide(b))
      yield* storeA.insert(Notes, { id: "after", text: "new" })
      const first = yield* Queue.take(received).pipe(Effect.timeout("10 seconds"))
      assert.strictEqual(first.id, "after")
      assert.strictEqual(yield* Queue.size(received), 0)
    }))

  /** A deferred trigger that makes a commit of a note titled "stall" wait for advisory lock 42. */
  const installStall = (url: string) =>
    Effect.promise(async () => {
      const admin = new pg.Client({ connectionString: url })
      await admin.connect()
      await admin.query(`CREATE FUNCTION fw_stall() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.text = 'stall' THEN PERFORM pg_advisory_lock(42); PERFORM pg_advisory_unlock(42); END IF; RETURN NULL; END $$`)
      await admin.query(`CREATE CONSTRAINT TRIGGER fw_stall AFTER INSERT ON notes DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION fw_stall()`)
      await admin.end()
    })

  /** Holds advisory lock 42 until the scope closes or `release` runs. */
  const holdLock = (url: string) =>
    Effect.gen(function*() {
      const client = new pg.Client({ connectionString: url })
      yield* Effect.acquireRelease(Effect.promise(() => client.connect()), () => Effect.promise(() => client.end().catch(() => undefined)))
      yield* Effect.promise(() => client.query("SELECT pg_advisory_lock(42)"))
      return Effect.promise(() => client.query("SELECT pg_advisory_unlock(42)")).pipe(Effect.asVoid)
    })

  /** Waits (live) until `writer`'s transaction is blocked inside COMMIT on the advisory lock. */
  const stalled = (url: string) =>
    Effect.promise(async () => {
      const admin = new pg.Client({ connectionString: url })
      await admin.connect()
      try {
        for (let i = 0; i < 500; i++) {
          const { rows } = await admin.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'`)
          if (rows.length > 0) return
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
        throw new Error("the commit never stalled")
      } finally {
        await admin.end()
      }
    })

  const collect = (layer: Context.Context<ChangeTap.ChangeTap>) =>
    Effect.gen(function*() {
      const received = yield* Queue.unbounded<ChangeEvent>()
      yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) =>
        tap.subscribe({ name: "collect", onEvent: (event) => Queue.offer(received, event) })).pipe(Effect.provide(layer))
      return received
    })

  const takeIds = (queue: Queue.Queue<ChangeEvent>, n: number) =>
    Effect.forEach(Array.from({ length: n }), () => Effect.map(Queue.take(queue), (event) => event.id)).pipe(Effect.timeout("30 seconds"))

  it.scopedLive("a commit stalled between its outbox row and COMMIT while 150 later ones commit is still delivered, once", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const a = yield* Layer.build(replica(url))
      const b = yield* Layer.build(replica(url))
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(a))
      yield* installStall(url)
      const received = yield* collect(b)
      const storeA = yield* Effect.provide(Store.Store, a)
      const release = yield* holdLock(url)
      const slow = yield* Effect.fork(storeA.insert(Notes, { id: "slow", text: "stall" }))
      yield* stalled(url)
      for (let i = 0; i < 150; i++) yield* storeA.insert(Notes, { id: `n${i}`, text: "x" })
      const first = yield* takeIds(received, 150)
      assert.strictEqual(new Set(first).size, 150)
      yield* release
      yield* Fiber.join(slow)
      yield* storeA.insert(Notes, { id: "last", text: "x" })
      const rest = yield* takeIds(received, 2)
      assert.deepStrictEqual([...rest].sort(), ["last", "slow"])
      assert.strictEqual(yield* Queue.size(received), 0)
    }), 120_000)

  it.scopedLive("a replica started while another's commit is stalled receives it once it commits", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const a = yield* Layer.build(replica(url))
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(a))
      yield* installStall(url)
      const storeA = yield* Effect.provide(Store.Store, a)
      for (let i = 0; i < 10; i++) yield* storeA.insert(Notes, { id: `before${i}`, text: "old" })
      const release = yield* holdLock(url)
      const slow = yield* Effect.fork(storeA.insert(Notes, { id: "slow", text: "stall" }))
      yield* stalled(url)
      // Later writes commit before B starts: the stalled one's outbox id is below all of theirs.
      for (let i = 0; i < 10; i++) yield* storeA.insert(Notes, { id: `between${i}`, text: "old" })
      const b = yield* Layer.build(replica(url))
      const received = yield* collect(b)
      yield* storeA.insert(Notes, { id: "during", text: "x" })
      assert.deepStrictEqual(yield* takeIds(received, 1), ["during"])
      yield* release
      yield* Fiber.join(slow)
      assert.deepStrictEqual(yield* takeIds(received, 1), ["slow"])
      yield* storeA.insert(Notes, { id: "after", text: "x" })
      assert.deepStrictEqual(yield* takeIds(received, 1), ["after"])
      assert.strictEqual(yield* Queue.size(received), 0)
    }), 60_000)

  it.scopedLive("outbox rows are stamped and pruned by the database's clock, not by a replica's skewed clock", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const hour = 3_600_000
      // A replica whose clock is two hours behind writes; its row is stamped with the database's time.
      const behind = yield* Layer.build(replica(url)).pipe(Effect.withClock(skewed(-2 * hour)))
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(behind))
      yield* Effect.flatMap(Store.Store, (store) => store.insert(Notes, { id: "recent", text: "x" })).pipe(
        Effect.provide(behind),
        Effect.withClock(skewed(-2 * hour))
      )
      const admin = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new pg.Client({ connectionString: url })
          await client.connect()
          return client
        }),
        (client) => Effect.promise(() => client.end())
      )
      const query = <A>(text: string) => Effect.promise(() => admin.query(text).then((result) => result.rows as Array<A>))
      const [stamp] = yield* query<{ readonly skew: string }>(
        `SELECT abs(created_at - extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS skew FROM _fw_change_outbox`
      )
      assert.isBelow(Number(stamp!.skew), 60_000)
      yield* query(`INSERT INTO _fw_change_outbox (origin, changes, created_at)
        VALUES ('elsewhere', '[]', (extract(epoch FROM clock_timestamp()) * 1000)::bigint - ${2 * hour})`)
      // A replica whose clock runs two hours ahead prunes on start: only the genuinely old row goes.
      yield* Layer.build(replica(url, { retainMs: hour })).pipe(Effect.withClock(skewed(2 * hour)))
      const remaining = yield* query<{ readonly origin: string }>(`SELECT origin FROM _fw_change_outbox ORDER BY id`).pipe(
        Effect.filterOrFail((rows) => rows.every((row) => row.origin !== "elsewhere")),
        Effect.retry(Schedule.spaced("50 millis")),
        Effect.timeout("10 seconds")
      )
      assert.strictEqual(remaining.length, 1, "the recent row is kept")
    }), 60_000)

  it.scopedLive("a backlog larger than one read (as after an outage) is read in pages, each change once, in order", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const a = yield* Layer.build(replica(url))
      const b = yield* Layer.build(replica(url, { pollMs: 2_000, readBatch: 7 }))
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(a))
      const received = yield* collect(b)
      const ids = Array.from({ length: 40 }, (_, i) => `p${String(i).padStart(2, "0")}`)
      // 40 outbox rows at once, as another replica's commits that B has not read yet.
      yield* Effect.promise(async () => {
        const admin = new pg.Client({ connectionString: url })
        await admin.connect()
        await admin.query("BEGIN")
        for (const id of ids) {
          const change = {
            table: "notes", op: "insert", id, tenantId: null, before: null, after: { id, text: "x" }, at: 0,
            provenance: { traceId: "backlog", subjectId: null, procedure: null }
          }
          await admin.query(`INSERT INTO _fw_change_outbox (origin, changes) VALUES ('elsewhere', $1)`, [
            JSON.stringify([change])
          ])
        }
        await admin.query(`SELECT pg_notify('${ChangeTap.fleetChannel}', 'elsewhere')`)
        await admin.query("COMMIT")
        await admin.end()
      })
      assert.deepStrictEqual(yield* takeIds(received, 40), ids)
      const storeA = yield* Effect.provide(Store.Store, a)
      yield* storeA.insert(Notes, { id: "last", text: "x" })
      assert.deepStrictEqual(yield* takeIds(received, 1), ["last"])
      assert.strictEqual(yield* Queue.size(received), 0)
    }), 60_000)
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
