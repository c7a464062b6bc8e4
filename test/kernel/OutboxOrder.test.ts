/**
 * The fleet outbox read when transactions commit out of outbox-id order (real PostgreSQL). Outbox
 * ids are taken at insert, commits happen in any order: a reader must deliver a row whose id is
 * below rows it already read once that row commits, exactly once, also on a replica that started
 * while it was open. Rows are written with raw connections, so the test holds each transaction
 * open exactly where it wants.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Queue, Redacted } from "effect"
import pg from "pg"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Pg from "../support/Pg.js"

/** One "process": its own pool and fleet tap; its listener's events go to a queue. */
const replica = (url: string) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      ChangeTap.layerFleet({ pollMs: 200 }).pipe(Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) })))
    )
    const received = yield* Queue.unbounded<ChangeEvent>()
    yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.subscribe({ name: "collect", onEvent: (e) => Queue.offer(received, e) })).pipe(
      Effect.provide(context)
    )
    return received
  })

const change = (id: string) => ({
  table: "notes", op: "insert", id, tenantId: null, before: null, after: { id }, at: 0,
  provenance: { traceId: "order", subjectId: null, procedure: null }
})

const connection = Pg.connection

/** Inserts the outbox row of change `id` on `client` (inside its open transaction, if any). */
const outbox = (client: pg.Client, id: string) =>
  client.query(`INSERT INTO _fw_change_outbox (origin, changes) VALUES ('elsewhere', $1) RETURNING id`, [
    JSON.stringify([change(id)])
  ]).then((result) => Number(result.rows[0].id))

const announce = (client: pg.Client) => client.query(`SELECT pg_notify('${ChangeTap.fleetChannel}', 'elsewhere')`)

/**
 * The ids of the events that arrive until `enough` holds for them (or 20 s passed), then of those
 * arriving within a further `quietMs` (an extra or doubled event shows up there).
 */
const drain = (queue: Queue.Queue<ChangeEvent>, enough: (ids: ReadonlyArray<string>) => boolean, quietMs = 500) =>
  Effect.gen(function*() {
    const ids: Array<string> = []
    const deadline = Date.now() + 20_000
    while (!enough(ids) && Date.now() < deadline) {
      const next = yield* Queue.take(queue).pipe(Effect.timeout(200), Effect.option)
      if (next._tag === "Some") ids.push(next.value.id)
    }
    while (true) {
      const next = yield* Queue.take(queue).pipe(Effect.timeout(quietMs), Effect.option)
      if (next._tag === "None") return ids
      ids.push(next.value.id)
    }
  })

const count = (n: number) => (ids: ReadonlyArray<string>) => ids.length >= n

describe.skipIf(Pg.serverUrl === null)("fleet outbox: commits out of id order (PostgreSQL)", () => {
  it.scopedLive("a transaction with a lower id that commits after a read of a higher one is delivered once, also to a replica started meanwhile", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const b = yield* replica(url)
      const [t1, t2] = [yield* connection(url), yield* connection(url)]
      yield* Effect.promise(async () => {
        await t1.query("BEGIN")
        await t2.query("BEGIN")
      })
      const low = yield* Effect.promise(() => outbox(t1, "low"))
      const high = yield* Effect.promise(() => outbox(t2, "high"))
      assert.isBelow(low, high)
      yield* Effect.promise(() => t2.query("COMMIT").then(() => announce(t2)))
      // B has read "high" (a snapshot in which "low" is still open).
      assert.deepStrictEqual(yield* drain(b, count(1)), ["high"])
      const c = yield* replica(url)
      yield* Effect.promise(() => t1.query("COMMIT").then(() => announce(t1)))
      assert.deepStrictEqual(yield* drain(b, count(1)), ["low"])
      assert.deepStrictEqual(yield* drain(c, count(1)), ["low"])
    }), 30_000)

  it.scopedLive("eight writers committing in random order around continual reads: each change delivered once, on a replica started midway too", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const b = yield* replica(url)
      const writers = yield* Effect.all(Array.from({ length: 8 }, () => connection(url)))
      // Per change: when its COMMIT was sent and when it returned (ms), to place it against C's start.
      const commits = new Map<string, { sent: number; done: number }>()
      const write = (client: pg.Client, w: number, rounds: number) =>
        Effect.promise(async () => {
          for (let i = 0; i < rounds; i++) {
            const id = `w${w}-${i}-${Math.random().toString(36).slice(2, 6)}`
            await client.query("BEGIN")
            await outbox(client, id)
            await new Promise((resolve) => setTimeout(resolve, Math.random() * 15))
            const sent = performance.now()
            await client.query("COMMIT")
            commits.set(id, { sent, done: performance.now() })
            if (Math.random() < 0.5) await announce(client)
          }
        })
      const first = yield* Effect.fork(Effect.all(writers.map((client, w) => write(client, w, 40)), { concurrency: "unbounded" }))
      yield* Effect.sleep("300 millis")
      const cStarting = performance.now()
      const c = yield* replica(url)
      const cStarted = performance.now()
      yield* Effect.sleep("300 millis")
      yield* Fiber.join(first)
      const toB = yield* drain(b, count(commits.size))
      const mustC = [...commits].filter(([, at]) => at.sent > cStarted).map(([id]) => id)
      const toC = yield* drain(c, (ids) => mustC.every((id) => ids.includes(id)))
      assert.strictEqual(toB.length, commits.size, "B: every change once")
      assert.deepStrictEqual(new Set(toB), new Set(commits.keys()))
      assert.strictEqual(new Set(toC).size, toC.length, "C: nothing twice")
      for (const [id, at] of commits) {
        // Committed after C started listening: C must have it; committed before C began: never.
        if (at.sent > cStarted) assert.include(toC, id, `C missed ${id}`)
        if (at.done < cStarting) assert.notInclude(toC, id, `C was handed ${id}, committed before it started`)
      }
    }), 60_000)
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
