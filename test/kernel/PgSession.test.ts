/**
 * PgSession (real PostgreSQL): the fleet tap's outbox reads and announcements run on a connection
 * of their own, outside the pool, replaced when the server ends it; under a tracer they go through
 * the client with their spans, in the session and in the fleet tap.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Queue, Redacted, Tracer } from "effect"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as PgSession from "../../src/kernel/drivers/pg/PgSession.js"
import * as Pg from "../support/Pg.js"
import { recordingTracer } from "./support/StoreSpans.js"

const pidStatement: PgSession.Prepared = { name: "fw_test_pid", text: "SELECT pg_backend_pid() AS pid, $1::text AS echo" }

const queryTextOf = (span: Tracer.Span) => {
  const text = span.attributes.get("db.query.text")
  return typeof text === "string" ? text : ""
}

describe.skipIf(Pg.serverUrl === null)("PgSession (PostgreSQL)", () => {
  it.scopedLive("runs on a connection of its own, not the pool's, and replaces one the server terminated", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))
      const pg = Context.get(context, PgClient.PgClient)
      const session = yield* PgSession.make(pg)
      // The pool's only connection is held: a statement that needed the pool would wait for good.
      yield* pg.reserve
      const pidOf = Effect.map(session.run<{ pid: number; echo: string }>(pidStatement, ["x"]), (rows) => rows[0]!)
      const first = yield* pidOf.pipe(Effect.timeout("10 seconds"))
      assert.strictEqual(first.echo, "x")
      // The same connection, statement prepared once.
      assert.strictEqual((yield* pidOf).pid, first.pid)
      const admin = yield* Pg.connection(url)
      yield* Effect.promise(() => admin.query("SELECT pg_terminate_backend($1)", [first.pid]))
      // The statement in flight when the server ended the session may fail; the next runs on a fresh one.
      let after = yield* Effect.either(pidOf)
      for (let attempt = 0; after._tag === "Left" && attempt < 3; attempt++) after = yield* Effect.either(pidOf)
      assert.isTrue(after._tag === "Right" && after.right.pid !== first.pid, "a fresh connection answers")
    }))

  it.scopedLive("plans each run for its values by default; with plans: generic, once per connection", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url) }))
      const pg = Context.get(context, PgClient.PgClient)
      const plansStatement: PgSession.Prepared = {
        name: "fw_test_plans",
        text: "SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements WHERE name = $1"
      }
      const plansAfterRuns = (session: PgSession.PgSession) =>
        Effect.gen(function*() {
          for (let run = 0; run < 7; run++) yield* session.run(pidStatement, [String(run)])
          const [plans] = yield* session.run<{ generic: number; custom: number }>(plansStatement, [pidStatement.name])
          return plans
        })
      assert.deepStrictEqual(yield* plansAfterRuns(yield* PgSession.make(pg)), { generic: 0, custom: 7 })
      assert.deepStrictEqual(yield* plansAfterRuns(yield* PgSession.make(pg, { plans: "generic" })), { generic: 7, custom: 0 })
    }))

  it.scopedLive("under a tracer, statements go through the client, each with its span", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url) }))
      const session = yield* PgSession.make(Context.get(context, PgClient.PgClient))
      const { spans, tracer } = yield* recordingTracer
      const rows = yield* Effect.withTracer(session.run<{ echo: string }>(pidStatement, ["traced"]), tracer)
      assert.strictEqual(rows[0]!.echo, "traced")
      assert.isTrue(spans.some((span) => span.name === "sql.execute" && queryTextOf(span).includes("pg_backend_pid")))
    }))

  it.scopedLive("a fleet tap built under a tracer reads the outbox and announces through the client, with spans", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const { spans, tracer } = yield* recordingTracer
      const replica = ChangeTap.layerFleet({ pollMs: 60_000, listenCheckMs: 60_000 }).pipe(
        Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) }))
      )
      const traced = yield* Effect.withTracer(Layer.build(replica), tracer)
      const plain = yield* Layer.build(replica)
      const received = yield* Queue.unbounded<ChangeEvent>()
      yield* Context.get(traced, ChangeTap.ChangeTap).subscribe({ name: "traced", onEvent: (event) => Queue.offer(received, event) })
      const change = {
        table: "notes", op: "insert" as const, id: "n1", tenantId: null, before: null, after: { id: "n1" }, at: 0,
        provenance: { traceId: "t", subjectId: null, procedure: null }
      }
      // Another replica's commit: its outbox row, then its announcement.
      const writer = Context.get(plain, ChangeTap.ChangeTap)
      const pg = Context.get(plain, PgClient.PgClient)
      yield* pg.withTransaction(writer.stage([change]))
      yield* writer.publish([change])
      assert.strictEqual((yield* Queue.take(received).pipe(Effect.timeout("10 seconds"))).id, "n1")
      assert.isTrue(
        spans.some((span) => span.name === "sql.execute" && queryTextOf(span).includes("pg_visible_in_snapshot")),
        "the outbox read has its span"
      )
      // The traced replica's own announcement.
      const own = Context.get(traced, ChangeTap.ChangeTap)
      yield* Effect.withTracer(Effect.zipRight(pg.withTransaction(own.stage([{ ...change, id: "n2" }])), own.publish([{ ...change, id: "n2" }])), tracer)
      yield* Queue.take(received).pipe(Effect.timeout("10 seconds"))
      for (let i = 0; i < 50 && !spans.some((span) => queryTextOf(span).includes("pg_notify")); i++) yield* Effect.sleep("50 millis")
      assert.isTrue(spans.some((span) => span.name === "sql.execute" && queryTextOf(span).includes("pg_notify")), "the announcement has its span")
    }))
})
