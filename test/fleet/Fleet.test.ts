/**
 * The fleet harness: real app processes on one PostgreSQL (fleet change scope, row history in
 * `sync` mode), driven over `POST /rpc`, with faults injected. After each scenario:
 * - every committed write produced exactly one change event on every replica that was running;
 * - row history is gapless per row and its newest version is the committed row;
 * - no committed write answered an error (an answered error means nothing was written, except
 *   `CommitUnknown`, which says it does not know).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import pgModule from "pg"
import { RowHistory } from "../../src/history/index.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Pg from "../support/Pg.js"
import { create, Docs, retitle } from "./app.js"
import * as Fleet from "./support.js"

type Outcome = { readonly key: string; readonly answer: "ok" | "transport" | string }

/** A write's outcome: success, a typed error (its tag), or no answer at all (the process died). */
const attempt = (effect: Effect.Effect<unknown, { readonly _tag: string }>, key: string) =>
  Effect.map(Effect.either(effect), (result): Outcome => ({
    key,
    answer: result._tag === "Right" ? "ok" : result.left._tag === "RpcClientError" ? "transport" : result.left._tag
  }))

/** Answered errors whose write is in the history anyway (a committed write answered as failed). */
const falseFailures = (outcomes: ReadonlyArray<Outcome>, committed: ReadonlySet<string>) =>
  outcomes.filter((o) => o.answer !== "ok" && o.answer !== "transport" && o.answer !== "CommitUnknown" && committed.has(o.key))

describe.skipIf(Pg.serverUrl === null)("fleet harness (real processes)", () => {
  it.scopedLive("contended writes over three replicas with kill -9 and pg_terminate_backend; a replica started mid-commit", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(Pg.layerClient(url)))
      // A commit of a doc titled "stall" waits inside PostgreSQL for advisory lock 42.
      yield* Fleet.withPg(url, async (c) => {
        await c.query(`CREATE FUNCTION fw_stall() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN IF NEW.title = 'stall' THEN PERFORM pg_advisory_lock(42); PERFORM pg_advisory_unlock(42); END IF; RETURN NULL; END $$`)
        await c.query(`CREATE CONSTRAINT TRIGGER fw_stall AFTER INSERT ON docs DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fw_stall()`)
      })
      const [r0, r1, r2] = yield* Effect.all([Fleet.start("r0", url), Fleet.start("r1", url), Fleet.start("r2", url)], {
        concurrency: "unbounded"
      })
      const replicas = [r0, r1, r2]
      const outcomes: Array<Outcome> = []
      const record = (effect: Effect.Effect<unknown, { readonly _tag: string }>, key: string) =>
        Effect.map(attempt(effect, key), (o) => void outcomes.push(o))

      // 1. 150 writes, 24 in flight, 4 in 5 of them updating one row; r2 killed -9 and r1's
      //    connections terminated in the middle.
      yield* r0.client.call(create, { id: "hot", title: "hot-0" })
      const burst = yield* Effect.fork(Effect.forEach(Array.from({ length: 150 }, (_, i) => i), (i) => {
        const replica = replicas[i % 3]!
        const title = `hot-${i + 1}`
        return i % 5 === 0
          ? record(replica.client.call(create, { id: `doc-${i}`, title }), `doc-${i}:${title}`)
          : record(replica.client.call(retitle, { id: "hot", title }), `hot:${title}`)
      }, { concurrency: 24, discard: true }))
      yield* Fleet.eventually(Effect.sync(() => outcomes.length), (n) => n >= 40)
      yield* Fleet.kill(r2)
      yield* Fleet.withPg(url, (c) => c.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'r1'`))
      yield* Fiber.join(burst)

      // 2. A commit stalled inside PostgreSQL (after its outbox row) while 60 later writes commit;
      //    r3 starts meanwhile; it receives the stalled write once it commits.
      const lock = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new pgModule.Client({ connectionString: url })
          await client.connect()
          await client.query("SELECT pg_advisory_lock(42)")
          return client
        }),
        (client) => Effect.promise(() => client.end().catch(() => undefined))
      )
      const stalled = yield* Effect.fork(attempt(r0.client.call(create, { id: "slow", title: "stall" }), "slow:stall"))
      yield* Fleet.eventually(
        Fleet.withPg(url, (c) => c.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event = 'advisory'`).then((r) => r.rowCount ?? 0)),
        (n) => n > 0
      )
      for (let i = 0; i < 60; i++) yield* record(r1.client.call(create, { id: `before-${i}`, title: `t${i}` }), `before-${i}:t${i}`)
      const r3 = yield* Fleet.start("r3", url)
      // Everything recorded from here on was written after r3 started (the stalled write included:
      // it is recorded once it answers).
      const sinceR3 = outcomes.length
      for (let i = 0; i < 5; i++) {
        yield* record(r1.client.call(retitle, { id: "hot", title: `during-${i}` }), `hot:during-${i}`)
        // A write that fails (nothing written) must reach no replica, r3 included.
        if (i === 1) yield* record(r1.client.call(retitle, { id: "missing", title: "never" }), "missing:never")
      }
      yield* Effect.promise(() => lock.query("SELECT pg_advisory_unlock(42)"))
      outcomes.push(yield* Fiber.join(stalled))

      // The invariants.
      const state = yield* Fleet.truth(url)
      const committed = state.versions.map((v) => `${v.rowId}:${v.title}`)
      const committedSet = new Set(committed)
      const problems = [...Fleet.historyProblems(state)]
      problems.push(...falseFailures(outcomes, committedSet).map((o) => `${o.key} committed but answered ${o.answer}`))
      for (const o of outcomes) if (o.answer === "ok" && !committedSet.has(o.key)) problems.push(`${o.key} answered ok but is not in the history`)
      for (const replica of [r0, r1]) {
        const received = yield* Fleet.eventually(Fleet.eventsOf(replica), (events) => events.length >= committed.length)
        problems.push(...Fleet.deliveryProblems(replica.name, received, committed))
      }
      // r3 receives what committed after it started: not every write it saw attempted (one that
      // answered an error, or never reached its replica, committed nothing and is delivered nowhere).
      const afterStart = outcomes.slice(sinceR3).map((o) => o.key).filter((key) => committedSet.has(key))
      problems.push(...Fleet.deliveryProblems("r3", yield* Fleet.eventually(Fleet.eventsOf(r3), (e) => e.length >= afterStart.length), afterStart))
      const missing = outcomes.find((o) => o.key === "missing:never")
      if (missing?.answer !== "RowNotFound") problems.push(`missing:never answered ${missing?.answer}, not RowNotFound`)
      const answered = outcomes.filter((o) => o.answer !== "transport")
      const errors = answered.filter((o) => o.answer !== "ok").map((o) => `${o.key} ${o.answer}`)
      console.log(
        `fleet harness: ${outcomes.length} writes, ${answered.length} answered (errors: ${errors.join(", ") || "none"}), ` +
          `${committed.length} committed changes; faults: kill -9 r2, pg_terminate_backend r1, a commit stalled while 60 commit, r3 started meanwhile; ` +
          `problems: ${problems.length}`
      )
      assert.deepStrictEqual(problems, [])
      assert.strictEqual(outcomes[outcomes.length - 1]!.answer, "ok")
    }), 180_000)
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
