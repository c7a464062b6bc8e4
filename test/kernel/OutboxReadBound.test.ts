/**
 * The fleet outbox read examines only what it may deliver (real PostgreSQL). A transaction left
 * open anywhere in the cluster (a long report, a stuck session, another database's) holds the
 * snapshots' xmin back; a read bounded below by that xmin examined every outbox row written since,
 * on every notification. Checked through the work PostgreSQL reports for the reader's own
 * statement (rows examined, never a duration), and through delivery while the xmin is held back.
 * The same holds on an outbox never analyzed (a new one, until autovacuum gets to it): planned on
 * guesses, the read walked the whole outbox in id order.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Queue, Redacted } from "effect"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as FleetTap from "../../src/kernel/changes/FleetTap.js"
import * as Pg from "../support/Pg.js"

const connection = Pg.connection

const change = (id: string) => ({
  table: "notes", op: "insert", id, tenantId: null, before: null, after: { id }, at: 0,
  provenance: { traceId: "bound", subjectId: null, procedure: null }
})

/** Takes `n` events (20 s at most), returning their ids. */
const take = (queue: Queue.Queue<ChangeEvent>, n: number) =>
  Effect.gen(function*() {
    const ids: Array<string> = []
    while (ids.length < n) ids.push((yield* Queue.take(queue).pipe(Effect.timeout("20 seconds"))).id)
    return ids
  })

/** Rows a plan node and its children read from tables: returned plus removed by a filter or recheck. */
const examined = (node: Record<string, unknown>): number => {
  const own = typeof node["Relation Name"] === "string"
    ? Number(node["Actual Rows"] ?? 0) + Number(node["Rows Removed by Filter"] ?? 0) + Number(node["Rows Removed by Index Recheck"] ?? 0)
    : 0
  const children = (node["Plans"] as ReadonlyArray<Record<string, unknown>> | undefined) ?? []
  return children.reduce((sum, child) => sum + examined(child), own)
}

describe.skipIf(Pg.serverUrl === null)("ChangeTap fleet outbox read", () => {
  it.scopedLive("while an old transaction holds the xmin back, a read examines only rows not yet read, and delivers them", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const applicationName = "fw_outbox_bound"
      const context = yield* Layer.build(
        ChangeTap.layerFleet({ pollMs: 200 }).pipe(
          Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), applicationName, maxConnections: 2 }))
        )
      )
      const received = yield* Queue.unbounded<ChangeEvent>()
      yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.subscribe({ name: "collect", onEvent: (e) => Queue.offer(received, e) })).pipe(
        Effect.provide(context)
      )
      // A transaction with an id, left open: every snapshot's xmin stays at or below it.
      const old = yield* connection(url)
      yield* Effect.promise(() => old.query("BEGIN").then(() => old.query("SELECT pg_current_xact_id()")))
      const writer = yield* connection(url)
      const rows = 2_000
      // One transaction per row, as writes are (a DO block commits each; no flush wait per commit).
      yield* Effect.promise(() => writer.query("SET synchronous_commit = off"))
      yield* Effect.promise(() =>
        writer.query(
          `DO $$ BEGIN FOR g IN 1..${rows} LOOP
             INSERT INTO _fw_change_outbox (origin, changes)
             SELECT 'elsewhere', jsonb_build_array(jsonb_build_object('table', 'notes', 'op', 'insert', 'id', 'bulk-' || g,
               'tenantId', null, 'before', null, 'after', jsonb_build_object('id', 'bulk-' || g), 'at', 0,
               'provenance', jsonb_build_object('traceId', 'bound', 'subjectId', null, 'procedure', null)));
             COMMIT;
           END LOOP; END $$`
        )
      )
      const bulk = yield* take(received, rows)
      assert.strictEqual(new Set(bulk).size, rows)
      // Later changes still arrive, one each, while the old transaction stays open.
      for (const id of ["after-1", "after-2"]) {
        yield* Effect.promise(() =>
          writer.query(`INSERT INTO _fw_change_outbox (origin, changes) VALUES ('elsewhere', $1)`, [JSON.stringify([change(id)])])
        )
        assert.deepStrictEqual(yield* take(received, 1), [id])
      }
      // The reader's statement as it ran (its pool connections keep their last query's text),
      // explained with a snapshot taken now, whose xmin the old transaction holds back.
      const lookup = Effect.promise(() =>
        writer.query<{ query: string }>(
          `SELECT query FROM pg_stat_activity WHERE application_name = $1 AND query LIKE '%pg_visible_in_snapshot%' LIMIT 1`,
          [applicationName]
        )
      ).pipe(Effect.map((result) => result.rows[0]?.query))
      let text = yield* lookup
      for (let attempt = 0; text === undefined && attempt < 50; attempt++) text = yield* Effect.zipRight(Effect.sleep("100 millis"), lookup)
      assert.isDefined(text, "the reader's statement was not found")
      const parameters = [...new Set(text!.match(/\$\d+/g) ?? [])].length
      const snapshot = (yield* Effect.promise(() => writer.query<{ snap: string }>("SELECT pg_current_snapshot()::text AS snap"))).rows[0]!.snap
      assert.isBelow(Number(snapshot.split(":")[0]), Number(snapshot.split(":")[1]), "the xmin is held back")
      // Parameters in order: the origin and the snapshot (the snapshot's text does for both), then
      // the id to read after (the page size is in the text).
      const values = [...Array.from({ length: parameters - 1 }, () => snapshot), "0"]
      // Planned on statistics, as autovacuum keeps them for a table in use (a never-analyzed table
      // is planned on guesses, whatever the predicate).
      yield* Effect.promise(() => writer.query("ANALYZE _fw_change_outbox"))
      yield* Effect.promise(() => writer.query(`PREPARE outbox_read AS ${text}`))
      // Prepared by name, it may run on a custom plan or (after five runs) a generic one.
      for (const mode of ["force_custom_plan", "force_generic_plan"]) {
        yield* Effect.promise(() => writer.query(`SET plan_cache_mode = ${mode}`))
        const plan = yield* Effect.promise(() =>
          writer.query<{ "QUERY PLAN": ReadonlyArray<{ Plan: Record<string, unknown> }> }>(
            `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE outbox_read(${values.map((v) => `'${v}'`).join(", ")})`
          )
        )
        const work = examined(plan.rows[0]!["QUERY PLAN"][0]!.Plan)
        // Nothing is left to deliver: the read finds (and examines) next to nothing, not the bulk.
        assert.isBelow(work, 100, `the read examined ${work} outbox rows (${mode})`)
      }
      yield* Effect.promise(() => old.query("ROLLBACK"))
    }))

  it.scopedLive("on an outbox never analyzed, a read examines only rows not yet read, and delivers them", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const context = yield* Layer.build(
        ChangeTap.layerFleet({ pollMs: 200 }).pipe(Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })))
      )
      const received = yield* Queue.unbounded<ChangeEvent>()
      yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.subscribe({ name: "collect", onEvent: (e) => Queue.offer(received, e) })).pipe(
        Effect.provide(context)
      )
      const writer = yield* connection(url)
      // Kept without statistics for the whole test (autovacuum could analyze it part way).
      yield* Effect.promise(() => writer.query("ALTER TABLE _fw_change_outbox SET (autovacuum_enabled = false)"))
      const rows = 2_000
      yield* Effect.promise(() => writer.query("SET synchronous_commit = off"))
      yield* Effect.promise(() =>
        writer.query(
          `DO $$ BEGIN FOR g IN 1..${rows} LOOP
             INSERT INTO _fw_change_outbox (origin, changes)
             SELECT 'elsewhere', jsonb_build_array(jsonb_build_object('table', 'notes', 'op', 'insert', 'id', 'bulk-' || g,
               'tenantId', null, 'before', null, 'after', jsonb_build_object('id', 'bulk-' || g), 'at', 0,
               'provenance', jsonb_build_object('traceId', 'bound', 'subjectId', null, 'procedure', null)));
             COMMIT;
           END LOOP; END $$`
        )
      )
      const bulk = yield* take(received, rows)
      assert.strictEqual(new Set(bulk).size, rows)
      const analyzed = yield* Effect.promise(() =>
        writer.query<{ n: string }>(
          `SELECT (coalesce(analyze_count, 0) + coalesce(autoanalyze_count, 0))::text AS n FROM pg_stat_user_tables WHERE relname = '_fw_change_outbox'`
        )
      )
      assert.strictEqual(analyzed.rows[0]?.n ?? "0", "0", "the outbox was analyzed")
      // The read as a replica runs it, with a snapshot taken now: nothing is left to deliver. It is
      // prepared by name, so after five runs the server may keep a generic plan (chosen without the
      // parameters' values): bounded under both, on an outbox never analyzed and on one analyzed.
      yield* Effect.promise(() => writer.query(`PREPARE outbox_read AS ${FleetTap.pageText(500)}`))
      const readWork = (mode: string) =>
        Effect.promise(async () => {
          await writer.query(`SET plan_cache_mode = ${mode}`)
          const plan = await writer.query<{ "QUERY PLAN": ReadonlyArray<{ Plan: Record<string, unknown> }> }>(
            `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE outbox_read('reader', pg_current_snapshot(), '0')`
          )
          return examined(plan.rows[0]!["QUERY PLAN"][0]!.Plan)
        })
      for (const analyze of [false, true]) {
        if (analyze) yield* Effect.promise(() => writer.query("ANALYZE _fw_change_outbox"))
        for (const mode of ["force_custom_plan", "force_generic_plan"]) {
          const work = yield* readWork(mode)
          assert.isBelow(work, 100, `the read examined ${work} outbox rows (${mode}${analyze ? ", analyzed" : ""})`)
        }
      }
      // And a later change still arrives.
      yield* Effect.promise(() =>
        writer.query(`INSERT INTO _fw_change_outbox (origin, changes) VALUES ('elsewhere', $1)`, [JSON.stringify([change("after")])])
      )
      assert.deepStrictEqual(yield* take(received, 1), ["after"])
    }))

  it.scopedLive("on a large outbox never analyzed, a read with changes to deliver examines those, not the outbox", () =>
    Effect.gen(function*() {
      // A fleet at a few thousand writes per second fills its outbox faster than autovacuum first
      // analyzes it (a minute or more): planned on guesses, the read walked the outbox in id order
      // from its first row, filtering, on every read (50–80 ms each at 100,000 rows; the fleet
      // bench's server then spent most of its time there).
      const url = yield* Pg.freshDatabase
      yield* Layer.build(ChangeTap.layerFleet({ pollMs: 60_000 }).pipe(
        Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 }))
      ))
      const writer = yield* connection(url)
      yield* Effect.promise(() => writer.query("ALTER TABLE _fw_change_outbox SET (autovacuum_enabled = false)"))
      yield* Effect.promise(() => writer.query("SET synchronous_commit = off"))
      // Rows the size of a real change (its row, provenance), a few writes per transaction.
      const bulk = (from: number, rows: number) =>
        Effect.promise(() =>
          writer.query(
            `DO $$ BEGIN FOR g IN ${from}..${from + rows - 1} LOOP
               INSERT INTO _fw_change_outbox (origin, changes)
               SELECT 'elsewhere', jsonb_build_array(jsonb_build_object('table', 'notes', 'op', 'insert', 'id', 'bulk-' || g,
                 'tenantId', null, 'before', null, 'after', jsonb_build_object('id', 'bulk-' || g, 'title', repeat('t', 120)),
                 'at', 1764300000000, 'ref', md5(g::text),
                 'provenance', jsonb_build_object('traceId', md5(g::text), 'subjectId', null, 'procedure', 'notes.create')));
               IF g % 7 = 0 THEN COMMIT; END IF;
             END LOOP; END $$`
          )
        )
      yield* bulk(1, 60_000)
      const snapshot = (yield* Effect.promise(() => writer.query<{ snap: string }>("SELECT pg_current_snapshot()::text AS snap"))).rows[0]!.snap
      // What committed since that snapshot: the next read's work.
      yield* bulk(60_001, 300)
      yield* Effect.promise(() => writer.query(`PREPARE outbox_read AS ${FleetTap.pageText(500)}`))
      for (const mode of ["force_custom_plan", "force_generic_plan"]) {
        yield* Effect.promise(() => writer.query(`SET plan_cache_mode = ${mode}`))
        const plan = yield* Effect.promise(() =>
          writer.query<{ "QUERY PLAN": ReadonlyArray<{ Plan: Record<string, unknown> }> }>(
            `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE outbox_read('reader', '${snapshot}', '0')`
          )
        )
        const root = plan.rows[0]!["QUERY PLAN"][0]!.Plan
        assert.strictEqual(Number(root["Actual Rows"]), 300, `the read found what committed since (${mode})`)
        const work = examined(root)
        assert.isBelow(work, 1_000, `the read examined ${work} outbox rows for 300 to deliver (${mode})`)
      }
    }))
})
