/**
 * A one-row insert with row history (`sync`) on PostgreSQL, outside a transaction: the row, its
 * version and (fleet scope) the outbox row as one autocommitted statement (see `FusedStage`).
 * Atomic, gapless under a concurrent delete and re-insert of the id, announced once committed, and
 * the classic transaction under a tracer.
 */
import { FetchHttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option, Schema } from "effect"
import type pg from "pg"
import * as Plugin from "../../src/app/Plugin.js"
import { rowAsOf, rowHistory, rowHistoryPlugin, RowHistory } from "../../src/history/index.js"
import type { Options } from "../../src/history/index.js"
import { versionPart } from "../../src/history/VersionStatements.js"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as FusedStage from "../../src/kernel/store/FusedStage.js"
import * as Provenance from "../../src/kernel/changes/Provenance.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as PluginHost from "../../src/server/PluginHost.js"
import { cuttingProxy } from "../kernel/support/CuttingProxy.js"
import { recordingTracer } from "../kernel/support/StoreSpans.js"
import * as Pg from "../support/Pg.js"

const Docs = defineTable("docs", { fields: { title: Schema.String } })
/** Rows of several tenants, with optional, nullable and excluded (`secret`) columns. */
const Notes = defineTable("notes", {
  fields: {
    tenantId: Schema.String,
    title: Schema.String,
    secret: Schema.optional(Schema.String),
    score: Schema.NullOr(Schema.Number),
    tags: Schema.optional(Schema.Array(Schema.String))
  },
  tenantField: "tenantId"
})

/**
 * A store with row history on `url` (fleet or local scope), its events recorded; `history`: the
 * history plugin's options, `plugins`: more plugins.
 */
const replica = (
  url: string,
  fleet: boolean,
  options: { readonly history?: Options; readonly plugins?: ReadonlyArray<Plugin.Plugin> } = {}
) =>
  Effect.gen(function*() {
    const plugins = [rowHistoryPlugin(options.history), ...(options.plugins ?? [])]
    const context = yield* Layer.build(
      Layer.scopedDiscard(Effect.forEach(plugins, PluginHost.start, { discard: true })).pipe(
        Layer.provideMerge(Store.layerSql),
        Layer.provideMerge(fleet ? ChangeTap.layerFleet({ pollMs: 300 }) : ChangeTap.layerLocal),
        Layer.provideMerge(Pg.layerClient(url)),
        Layer.provide(FetchHttpClient.layer)
      )
    )
    const events: Array<ChangeEvent> = []
    const tap = yield* Effect.provide(ChangeTap.ChangeTap, context)
    yield* tap.subscribe({ name: "test", onEvent: (event) => Effect.sync(() => void events.push(event)) })
    return { store: yield* Effect.provide(Store.Store, context), tap, events }
  })

const setUp = Effect.gen(function*() {
  const url = yield* Pg.freshDatabase
  yield* SchemaDiffer.apply([Docs, Notes, RowHistory]).pipe(Effect.provide(Pg.layerClient(url)))
  return url
})

/** The text of the statement of this database that waits on a lock, once one does. */
const blocked = (admin: pg.Client) =>
  Effect.promise(async () => {
    for (let i = 0; i < 500; i++) {
      const { rows } = await admin.query(
        `SELECT query FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND wait_event_type = 'Lock'`
      )
      if (rows.length > 0) return rows[0].query as string
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const { rows } = await admin.query(`SELECT pid, state, wait_event_type, wait_event, left(query, 80) AS q FROM pg_stat_activity WHERE datname = current_database()`)
    throw new Error(`no statement waited: ${JSON.stringify(rows)}`)
  })

const versionsOf = (store: Store.StoreShape, id: string) =>
  Effect.map(rowHistory(store, Docs, id, null), (versions) => versions.map((v) => `${v.version}:${v.op}:${v.data?.title ?? "-"}`))

/** Text only a statement of several rows has: the rows' values for a set-form part (see `FusedStage.composeBatch`). */
const severalRows = `) AS v("id", `

/** The texts of the statements of several rows sent through `proxy` (each is parsed once, then sent by name). */
const batchTexts = (sent: ReadonlyArray<string>) =>
  // A Parse message carries its name and text, each ended by a NUL; a batch's insert sets its lock_timeout.
  sent.join("").split("\u0000").filter((text) => text.startsWith(`WITH "row"`) && text.includes(`set_config('lock_timeout'`))

const count = (text: string, of: string) => text.split(of).length - 1

const oneStatement = (text: string) => {
  assert.match(text, /^WITH "row" AS \(INSERT INTO "docs"/, "the row's insert opens the statement")
  assert.include(text, `INSERT INTO "_fw_row_history"`, "the version is written in the same statement")
}

describe.skipIf(Pg.serverUrl === null)("one-statement insert with row history (PostgreSQL)", () => {
  it.scopedLive("the row and its version are one statement; the change is announced once it committed, also if the caller was interrupted", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const { events, store } = yield* replica(url, false)
      const admin = yield* Pg.connection(url)
      // Another transaction inserts the same id, and will roll back: the statement waits for it.
      const holder = yield* Pg.connection(url)
      yield* Effect.promise(() => holder.query(`BEGIN; INSERT INTO docs (id, title) VALUES ('a', 'held')`))
      const write = yield* Effect.fork(store.insert(Docs, { id: "a", title: "one" }))
      oneStatement(yield* blocked(admin))
      // Interrupted while its statement waits: it still waits for the answer, then announces.
      const interrupted = yield* Effect.fork(Fiber.interrupt(write))
      yield* Effect.promise(() => holder.query("ROLLBACK"))
      yield* Fiber.join(interrupted)
      assert.deepStrictEqual(yield* versionsOf(store, "a"), ["1:insert:one"])
      assert.isTrue(Option.isSome(yield* store.get(Docs, "a")))
      for (let i = 0; i < 100 && events.length === 0; i++) yield* Effect.sleep("20 millis")
      assert.deepStrictEqual(events.map((e) => `${e.op}:${e.id}`), ["insert:a"])

      const inserted = yield* store.insert(Docs, { id: "b", title: "two" })
      assert.strictEqual(inserted.title, "two")
      assert.deepStrictEqual(yield* versionsOf(store, "b"), ["1:insert:two"])
    }), 60_000)

  it.scopedLive("a taken id answers DuplicateRow and writes no version; a clashing version writes nothing and answers as in a transaction", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const { store } = yield* replica(url, false)
      yield* store.insert(Docs, { id: "d", title: "first" })
      const duplicate = yield* Effect.flip(store.insert(Docs, { id: "d", title: "second" }))
      assert.deepStrictEqual([duplicate._tag, (duplicate as { table?: string }).table, (duplicate as { id?: string }).id], [
        "DuplicateRow",
        "docs",
        "d"
      ])
      assert.deepStrictEqual(yield* versionsOf(store, "d"), ["1:insert:first"])

      // History edited by hand: the id of the next version of docs/z is taken by another row's record.
      const admin = yield* Pg.connection(url)
      yield* Effect.promise(() =>
        admin.query(`INSERT INTO "_fw_row_history" ("id", "tableName", "rowId", "version", "op", "data", "changedAt", "tenantId", "traceId", "subjectId", "procedure")
          VALUES ('docs:z:0000000001', 'elsewhere', 'z', 1, 'insert', NULL, 0, NULL, 't', NULL, NULL)`)
      )
      const clash = yield* Effect.flip(store.insert(Docs, { id: "z", title: "never" }))
      assert.deepStrictEqual([clash._tag, (clash as { table?: string }).table], ["DuplicateRow", "_fw_row_history"])
      assert.isTrue(Option.isNone(yield* store.get(Docs, "z")), "the row was not written either")
    }), 60_000)

  it.scopedLive("a delete and re-insert of the id racing the statement: versions stay gapless and in commit order", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const { store } = yield* replica(url, false)
      yield* store.insert(Docs, { id: "x", title: "old" })
      // Another writer deletes the row and records its version 2, and has not committed yet.
      const other = yield* Pg.connection(url)
      yield* Effect.promise(() =>
        other.query(`BEGIN; DELETE FROM docs WHERE id = 'x';
          INSERT INTO "_fw_row_history" ("id", "tableName", "rowId", "version", "op", "data", "changedAt", "tenantId", "traceId", "subjectId", "procedure")
          VALUES ('docs:x:0000000002', 'docs', 'x', 2, 'delete', NULL, 0, NULL, 't', NULL, NULL)`)
      )
      // The re-insert's statement takes its snapshot (version 1 newest), then waits on the deleted row.
      const admin = yield* Pg.connection(url)
      const write = yield* Effect.fork(store.insert(Docs, { id: "x", title: "new" }))
      oneStatement(yield* blocked(admin))
      yield* Effect.promise(() => other.query("COMMIT"))
      const inserted = yield* Fiber.join(write)
      assert.strictEqual(inserted.title, "new")
      assert.deepStrictEqual(yield* versionsOf(store, "x"), ["1:insert:old", "2:delete:-", "3:insert:new"])
      assert.strictEqual((yield* rowAsOf(store, Docs, "x", null, Number.MAX_SAFE_INTEGER))?.title, "new")
    }), 60_000)

  it.scopedLive("under a tracer the insert takes the transaction: the history stager's onStage span is there", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const { store } = yield* replica(url, false)
      const { spans, tracer } = yield* recordingTracer
      yield* Effect.withTracer(store.insert(Docs, { id: "t", title: "traced" }), tracer)
      const names = spans.map((s) => s.name)
      assert.include(names, "fw.store insert")
      assert.include(names, "fw.plugin history onStage")
      assert.deepStrictEqual(yield* versionsOf(store, "t"), ["1:insert:traced"])
    }), 60_000)

  it.scopedLive("fleet scope: one statement writes the row, its version and the outbox row; each replica receives the change once", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const a = yield* replica(url, true)
      const b = yield* replica(url, true)
      const admin = yield* Pg.connection(url)
      const holder = yield* Pg.connection(url)
      yield* Effect.promise(() => holder.query(`BEGIN; INSERT INTO docs (id, title) VALUES ('f', 'held')`))
      const write = yield* Effect.fork(a.store.insert(Docs, { id: "f", title: "fleet" }))
      const text = yield* blocked(admin)
      oneStatement(text)
      assert.include(text, "INSERT INTO _fw_change_outbox")
      yield* Effect.promise(() => holder.query("ROLLBACK"))
      yield* Fiber.join(write)
      yield* a.store.insert(Docs, { id: "g", title: "again" })
      const outbox = yield* Effect.promise(() => admin.query(`SELECT changes FROM _fw_change_outbox ORDER BY id`))
      assert.deepStrictEqual(
        outbox.rows.map((r) => (r.changes as Array<ChangeEvent>).map((c) => `${c.op}:${c.table}:${c.id}:${String(c.after?.title)}`)),
        [["insert:docs:f:fleet"], ["insert:docs:g:again"]],
        "one outbox row per write, history versions are no change events"
      )
      const [first] = outbox.rows[0].changes as Array<ChangeEvent>
      assert.strictEqual(first!.ref, a.events.find((e) => e.id === "f")?.ref, "the payload is the published change")
      for (let i = 0; i < 100 && b.events.length < 2; i++) yield* Effect.sleep("50 millis")
      yield* Effect.sleep("400 millis")
      assert.deepStrictEqual(a.events.map((e) => `${e.id}:${e.remote === true}`), ["f:false", "g:false"])
      assert.deepStrictEqual(b.events.map((e) => `${e.id}:${e.remote === true}`), ["f:true", "g:true"])
      assert.deepStrictEqual(yield* versionsOf(b.store, "f"), ["1:insert:fleet"])
    }), 60_000)

  it.scopedLive("the statement is prepared by name: parsed once per connection, then sent by name, also after a column is added", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const proxy = yield* cuttingProxy(new URL(url))
      const { store } = yield* replica(proxy.url, false)
      for (const id of ["a", "b", "c"]) yield* store.insert(Docs, { id, title: id })
      const texts = proxy.sent.filter((chunk) => chunk.includes(`WITH "row"`))
      const named = proxy.sent.filter((chunk) => /fw_prepared_\d+/.test(chunk))
      assert.strictEqual(texts.length, 1, "the text is sent once")
      assert.strictEqual(named.length, 3, "every write names the prepared statement")
      // A column added later makes the server plan it again; the result's shape does not change.
      const admin = yield* Pg.connection(url)
      yield* Effect.promise(() => admin.query(`ALTER TABLE docs ADD COLUMN extra text`))
      yield* store.insert(Docs, { id: "d", title: "after" })
      assert.deepStrictEqual(yield* versionsOf(store, "d"), ["1:insert:after"])
      assert.strictEqual(proxy.sent.filter((chunk) => chunk.includes(`WITH "row"`)).length, 1)
    }), 60_000)

  /** Inserts `ids` at once (all waiting in the lane before any answer), each one's outcome as `id:tag`. */
  const burst = (store: Store.StoreShape, ids: ReadonlyArray<string>) =>
    Effect.all(
      ids.map((id) =>
        store.insert(Docs, { id, title: `t-${id}` }).pipe(
          Effect.match({ onFailure: (error) => `${id}:${error._tag}`, onSuccess: () => `${id}:ok` })
        )
      ),
      { concurrency: "unbounded" }
    )

  const ids = (n: number, prefix = "c") => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, "0")}`)

  /** The one-statement writes sent for a burst of `n` inserts (all succeeding) on a fresh replica. */
  const statementsOfBurst = (url: string, prefix: string, n: number) =>
    Effect.gen(function*() {
      const proxy = yield* cuttingProxy(new URL(url))
      const { store } = yield* replica(proxy.url, false)
      const writes = ids(n, prefix)
      assert.deepStrictEqual(yield* burst(store, writes), writes.map((id) => `${id}:ok`))
      return proxy.sent.filter((chunk) => chunk.includes(`WITH "row"`) || /fw_prepared_\d+/.test(chunk)).length
    })

  it.scopedLive("group commit: concurrent inserts go together, fewer statements than writes, all by name; a taken id fails only its own write", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const proxy = yield* cuttingProxy(new URL(url))
      const { events, store } = yield* replica(proxy.url, false)
      yield* store.insert(Docs, { id: "c05", title: "before" })
      yield* store.insert(Docs, { id: "c31", title: "before" })
      const sentBefore = proxy.sent.length
      const writes = ids(40)
      const outcomes = yield* burst(store, writes)
      assert.deepStrictEqual(
        outcomes,
        writes.map((id) => id === "c05" || id === "c31" ? `${id}:DuplicateRow` : `${id}:ok`)
      )
      const fused = proxy.sent.slice(sentBefore).filter((chunk) => chunk.includes(`WITH "row"`) || /fw_prepared_\d+/.test(chunk))
      assert.deepStrictEqual(fused.filter((chunk) => !/fw_prepared_\d+/.test(chunk)), [], "no write took the client's unnamed path")
      // The first sent at once (the lane was free), the rest together as answers came back.
      assert.isAtMost(fused.length, 6, `statements: ${fused.length}`)
      assert.isTrue(fused.some((chunk) => chunk.includes(severalRows)), "a statement of several rows")
      for (const id of writes) {
        assert.deepStrictEqual(yield* versionsOf(store, id), [`1:insert:${id === "c05" || id === "c31" ? "before" : `t-${id}`}`])
      }
      assert.strictEqual((yield* store.find(Docs)).length, writes.length)
      for (let i = 0; i < 100 && events.length < writes.length; i++) yield* Effect.sleep("20 millis")
      assert.deepStrictEqual(events.map((e) => e.id).sort(), writes, "each written row announced once (the two before too)")
    }), 60_000)

  it.scopedLive("group commit: a table with a trigger on insert keeps one statement per insert", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      // A trigger that updates a row shared by every write (as an incremental aggregate's does):
      // rows written together would lock several such rows in one transaction.
      const admin = yield* Pg.connection(url)
      yield* Effect.promise(() =>
        admin.query(`CREATE TABLE tally (n int); INSERT INTO tally VALUES (0);
          CREATE FUNCTION count_docs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE tally SET n = n + 1; RETURN NEW; END $$;
          CREATE TRIGGER docs_tally AFTER INSERT ON docs FOR EACH ROW EXECUTE FUNCTION count_docs()`)
      )
      assert.strictEqual(yield* statementsOfBurst(url, "t", 20), 20, "one statement per insert")
      assert.strictEqual((yield* Effect.promise(() => admin.query(`SELECT n FROM tally`))).rows[0].n, 20)
    }), 60_000)

  it.scopedLive("group commit: a table with a foreign key keeps one statement per insert (its check locks the parent rows)", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const admin = yield* Pg.connection(url)
      yield* Effect.promise(() =>
        admin.query(`CREATE TABLE titles (title text PRIMARY KEY);
          INSERT INTO titles SELECT 't-k' || lpad(g::text, 2, '0') FROM generate_series(0, 19) g;
          ALTER TABLE docs ADD CONSTRAINT docs_title FOREIGN KEY (title) REFERENCES titles (title)`)
      )
      assert.strictEqual(yield* statementsOfBurst(url, "k", 20), 20, "one statement per insert")
    }), 60_000)

  it.scopedLive("group commit: large rows are not put together past the byte budget (a statement over 1 GB is refused by closing the connection)", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const proxy = yield* cuttingProxy(new URL(url))
      const { store } = yield* replica(proxy.url, true)
      const big = "x".repeat(1_500_000)
      const writes = ids(8, "b")
      const outcomes = yield* Effect.all(
        writes.map((id) => store.insert(Docs, { id, title: `${id}${big}` }).pipe(Effect.match({ onFailure: (e) => e._tag, onSuccess: () => "ok" }))),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(outcomes, writes.map(() => "ok"))
      // Each row travels three times (row, version, outbox change): 4.5 MB, over the 4 MiB budget alone.
      const statements = proxy.sent.filter((chunk) => chunk.includes(`WITH "row"`) || /fw_prepared_\d+/.test(chunk))
      assert.strictEqual(statements.length, writes.length, "one statement per large row")
      assert.strictEqual((yield* store.find(Docs)).length, writes.length)
    }), 60_000)

  it.scopedLive("group commit: a batch waiting on a lock gives way, so a transaction inserting some of its ids in another order commits as with one-row inserts", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const { store } = yield* replica(url, false)
      yield* store.insert(Docs, { id: "warm", title: "w" })
      // Another writer's uncommitted insert of "m".
      const holder = yield* Pg.connection(url)
      yield* Effect.promise(() => holder.query(`BEGIN; INSERT INTO docs (id, title) VALUES ('m', 'held')`))
      // The app's transaction inserts "z", then later "a" (a taken id is fine for it).
      const started = yield* Deferred.make<void>()
      const go = yield* Deferred.make<void>()
      const transaction = yield* Effect.fork(store.transaction(Effect.gen(function*() {
        yield* store.insert(Docs, { id: "z", title: "tx" })
        yield* Deferred.succeed(started, undefined)
        yield* Deferred.await(go)
        return yield* store.insert(Docs, { id: "a", title: "tx" }).pipe(
          Effect.as("inserted"),
          Effect.catchTag("DuplicateRow", () => Effect.succeed("taken"))
        )
      })).pipe(Effect.either))
      yield* Deferred.await(started)
      // One-row inserts of a, m and z from other callers ("p" first, alone: a, m, z go together, in
      // id order, and wait on "m" holding "a").
      const others = yield* Effect.fork(burst(store, ["p", "a", "m", "z"]))
      yield* Effect.sleep("300 millis")
      yield* Deferred.succeed(go, undefined)
      yield* Effect.sleep("300 millis")
      yield* Effect.promise(() => holder.query("ROLLBACK"))
      const outcome = yield* Fiber.join(transaction)
      assert.deepStrictEqual(outcome._tag === "Right" ? outcome.right : outcome.left._tag, "taken")
      assert.deepStrictEqual(yield* Fiber.join(others), ["p:ok", "a:ok", "m:ok", "z:DuplicateRow"])
    }), 60_000)

  it.scopedLive("group commit: an insert waiting on another transaction's lock does not hold back the table's later inserts", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const { store } = yield* replica(url, false)
      const admin = yield* Pg.connection(url)
      const holder = yield* Pg.connection(url)
      yield* Effect.promise(() => holder.query(`BEGIN; INSERT INTO docs (id, title) VALUES ('held', 'holder')`))
      const waiting = yield* Effect.fork(store.insert(Docs, { id: "held", title: "mine" }))
      oneStatement(yield* blocked(admin))
      // One after another, as a caller would: each would wait for the held one if it kept the lane.
      for (const id of ["l1", "l2", "l3", "l4", "l5"]) {
        const written = yield* store.insert(Docs, { id, title: id }).pipe(Effect.timeout("10 seconds"))
        assert.strictEqual(written.title, id)
      }
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)), "the held insert still waits")
      yield* Effect.promise(() => holder.query("ROLLBACK"))
      assert.strictEqual((yield* Fiber.join(waiting)).title, "mine")
      assert.deepStrictEqual(yield* versionsOf(store, "held"), ["1:insert:mine"])
    }), 60_000)

  it.scopedLive("group commit, fleet scope: each write of a batch is its own outbox row, received once by the other replica", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const a = yield* replica(url, true)
      const b = yield* replica(url, true)
      const writes = ids(30, "f")
      assert.deepStrictEqual(yield* burst(a.store, writes), writes.map((id) => `${id}:ok`))
      const admin = yield* Pg.connection(url)
      const outbox = yield* Effect.promise(() => admin.query(`SELECT changes, xid::text AS xid FROM _fw_change_outbox ORDER BY id`))
      assert.deepStrictEqual(
        outbox.rows.map((r) => (r.changes as Array<ChangeEvent>).map((c) => c.id)).sort(),
        writes.map((id) => [id])
      )
      assert.isBelow(new Set(outbox.rows.map((r) => r.xid)).size, writes.length, "rows of one batch share its transaction")
      for (let i = 0; i < 200 && b.events.length < writes.length; i++) yield* Effect.sleep("50 millis")
      yield* Effect.sleep("400 millis")
      assert.deepStrictEqual(b.events.map((e) => `${e.id}:${e.remote === true}`).sort(), writes.map((id) => `${id}:true`))
      assert.deepStrictEqual(a.events.map((e) => `${e.id}:${e.remote === true}`).sort(), writes.map((id) => `${id}:false`))
    }), 60_000)

  it.scopedLive("group commit: a batch the server refuses is written again row by row; only the refused row fails", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const { events, store } = yield* replica(url, false)
      // History edited by hand: the next version of docs/c12 is taken, so the batch holding it is refused.
      const admin = yield* Pg.connection(url)
      yield* Effect.promise(() =>
        admin.query(`INSERT INTO "_fw_row_history" ("id", "tableName", "rowId", "version", "op", "data", "changedAt", "tenantId", "traceId", "subjectId", "procedure")
          VALUES ('docs:c12:0000000001', 'elsewhere', 'c12', 1, 'insert', NULL, 0, NULL, 't', NULL, NULL)`)
      )
      const writes = ids(20)
      const outcomes = yield* burst(store, writes)
      assert.deepStrictEqual(outcomes, writes.map((id) => id === "c12" ? `${id}:DuplicateRow` : `${id}:ok`))
      assert.isTrue(Option.isNone(yield* store.get(Docs, "c12")))
      for (const id of writes) {
        if (id !== "c12") assert.deepStrictEqual(yield* versionsOf(store, id), [`1:insert:t-${id}`])
      }
      for (let i = 0; i < 100 && events.length < writes.length - 1; i++) yield* Effect.sleep("20 millis")
      yield* Effect.sleep("200 millis")
      assert.deepStrictEqual(events.map((e) => e.id).sort(), writes.filter((id) => id !== "c12"))
    }), 60_000)

  it.scopedLive("group commit, fleet scope: a batch whose answer was lost answers CommitUnknown for each row, each delivered to its own replica once", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      // A statement of several rows (its text, sent the first time on a connection).
      const proxy = yield* cuttingProxy(new URL(url), severalRows)
      const { events, store } = yield* replica(proxy.url, true)
      proxy.arm()
      const writes = ids(20, "u")
      const outcomes = yield* burst(store, writes)
      const unknown = outcomes.filter((o) => o.endsWith(":CommitUnknown")).map((o) => o.split(":")[0]!)
      assert.isAbove(unknown.length, 1, `outcomes: ${outcomes.join(", ")}`)
      assert.deepStrictEqual(outcomes.filter((o) => !o.endsWith(":CommitUnknown") && !o.endsWith(":ok")), [])
      const admin = yield* Pg.connection(url)
      const stored = yield* Effect.promise(() => admin.query(`SELECT id FROM docs ORDER BY id`))
      assert.deepStrictEqual(stored.rows.map((r) => r.id), writes, "every write committed")
      for (let i = 0; i < 200 && events.length < writes.length; i++) yield* Effect.sleep("50 millis")
      yield* Effect.sleep("700 millis")
      assert.deepStrictEqual(events.map((e) => `${e.id}:${e.remote === true}`).sort(), writes.map((id) => `${id}:false`))
    }), 60_000)

  it.scopedLive("fleet scope: a one-statement write whose answer was lost answers CommitUnknown, and is delivered to its own replica once", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const target = new URL(url)
      // The fused statement's text, or its prepared name once the connection has parsed it.
      const proxy = yield* cuttingProxy(target, `WITH "row"`, "fw_prepared_")
      const { events, store } = yield* replica(proxy.url, true)
      yield* store.insert(Docs, { id: "before", title: "plain" })
      proxy.arm()
      const outcome = yield* Effect.flip(store.insert(Docs, { id: "lost", title: "answer lost" }))
      assert.strictEqual(outcome._tag, "CommitUnknown")
      const admin = yield* Pg.connection(url)
      const stored = yield* Effect.promise(() => admin.query(`SELECT id FROM docs WHERE id = 'lost'`))
      assert.strictEqual(stored.rowCount, 1, "the write committed")
      for (let i = 0; i < 100 && !events.some((e) => e.id === "lost"); i++) yield* Effect.sleep("100 millis")
      yield* Effect.sleep("700 millis")
      assert.deepStrictEqual(events.map((e) => `${e.id}:${e.remote === true}`), ["before:false", "lost:false"])
      assert.deepStrictEqual(yield* versionsOf(store, "lost"), ["1:insert:answer lost"])
    }), 60_000)
  /** The content of the `i`th note: two tenants, `secret` (excluded from history) and `tags` sometimes absent, `score` sometimes null. */
  const noteOf = (id: string, i: number) => ({
    id,
    tenantId: i % 2 === 0 ? "acme" : "globex",
    title: `n${i}`,
    ...(i % 3 === 0 ? {} : { secret: `s${i}` }),
    score: i % 4 === 1 ? null : i * 1.5,
    ...(i % 5 === 2 ? { tags: ["a", `t${i}`] } : {})
  })

  it.scopedLive("group commit, fleet scope, set form: a batch is one version insert and one outbox insert whatever its size; its versions and outbox rows are those one-by-one inserts write; a taken id writes neither", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const proxy = yield* cuttingProxy(new URL(url))
      const { store } = yield* replica(proxy.url, true, { history: { excludeColumns: { notes: ["secret"] } } })
      const n = 24
      // One by one: each finds its lane free and goes alone.
      for (let i = 0; i < n; i++) yield* store.insert(Notes, noteOf(`s${String(i).padStart(2, "0")}`, i))
      assert.deepStrictEqual(batchTexts(proxy.sent), [], "one by one, no statement of several rows")
      // The same notes at once, one id taken by a note written before.
      yield* store.insert(Notes, { ...noteOf("b07", 99), title: "taken" })
      const writes = ids(n, "b")
      const outcomes = yield* Effect.all(
        writes.map((id, i) =>
          store.insert(Notes, noteOf(id, i)).pipe(Effect.match({ onFailure: (e) => `${id}:${e._tag}`, onSuccess: () => `${id}:ok` }))
        ),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(outcomes, writes.map((id) => id === "b07" ? `${id}:DuplicateRow` : `${id}:ok`))
      const texts = batchTexts(proxy.sent)
      assert.isAbove(texts.length, 0, "some statement of several rows")
      for (const text of texts) {
        assert.isAbove(count(text, `set_config('lock_timeout'`), 0)
        assert.strictEqual(count(text, `INSERT INTO "_fw_row_history"`), 1, "one version insert for the batch")
        assert.strictEqual(count(text, `INSERT INTO _fw_change_outbox`), 1, "one outbox insert for the batch")
        assert.notInclude(text, `"r1" AS (SELECT`, "no CTE per row")
      }

      const admin = yield* Pg.connection(url)
      const versions = (yield* Effect.promise(() =>
        admin.query(`SELECT "id", "rowId", "version", "op", "data", "changedAt", "tenantId", "traceId", "subjectId", "procedure"
          FROM "_fw_row_history" WHERE "tableName" = 'notes' ORDER BY "rowId", "version"`)
      )).rows
      const outbox = (yield* Effect.promise(() => admin.query(`SELECT changes FROM _fw_change_outbox ORDER BY id`))).rows
        .map((r) => r.changes as Array<ChangeEvent>)
      /** What a write recorded, without what differs between two writes of the same content (ids, times, refs). */
      const versionOf = (id: string) =>
        versions.filter((v) => v.rowId === id).map((v) => {
          assert.strictEqual(v.id, `notes:${id}:${String(v.version).padStart(10, "0")}`)
          assert.isNumber(v.changedAt)
          const { id: _id, rowId: _rowId, changedAt: _at, ...rest } = v
          return { ...rest, data: v.data === null ? null : { ...v.data, id: "-" } }
        })
      const changeOf = (id: string) =>
        outbox.filter((changes) => changes.some((c) => c.id === id)).map((changes) =>
          changes.map(({ at: _at, id: _id, ref, ...rest }) => {
            assert.isString(ref)
            return { ...rest, after: rest.after === null ? null : { ...rest.after, id: "-" } }
          })
        )
      for (let i = 0; i < n; i++) {
        const one = `s${String(i).padStart(2, "0")}`
        const batched = writes[i]!
        if (batched === "b07") {
          assert.deepStrictEqual(versionOf(batched).map((v) => v.data?.title), ["taken"], "the taken id wrote no version")
          assert.strictEqual(changeOf(batched).length, 1, "the taken id wrote no outbox row")
          continue
        }
        assert.strictEqual(versionOf(one).length, 1)
        assert.deepStrictEqual(versionOf(batched), versionOf(one), `version of ${batched}`)
        assert.deepStrictEqual(changeOf(batched), changeOf(one), `outbox row of ${batched}`)
        assert.notProperty(versionOf(batched)[0]!.data, "secret")
      }
      assert.strictEqual(outbox.length, 2 * n, "one outbox row per written note")
    }), 60_000)

  /**
   * A plugin writing a row of its own table `name` for every inserted doc in the fused statement,
   * with a set form or without one (per row), recording each result with the write it came for.
   */
  const auditPlugin = (name: string, set: boolean, results: Array<string>) =>
    Plugin.definePlugin({
      name,
      permissions: ["store:write", "store:changes:read"],
      // The transaction's staging: nothing to audit there in these tests.
      onStage: () => Effect.void,
      onStageFused: (change) => {
        const statement = (returning: string) => (from: string, value: (index: number) => string) =>
          `INSERT INTO ${name} (row_id, title) SELECT ${value(0)}::text, ${value(1)}::text FROM ${from} RETURNING ${returning}`
        return {
          key: name,
          values: [change.id, String(change.after?.title)],
          statement: statement(`row_id, title`),
          ...(set ? { statementForRows: statement(`row_id, title, row_id AS "${FusedStage.rowIdColumn}"`) } : {}),
          onResult: (returned) => void results.push(`${name}:${change.id}:${String(returned.row_id)}:${String(returned.title)}`)
        }
      }
    })

  it.scopedLive("group commit: a batch mixing set-form parts with a plugin's part without one writes the former once and the latter per row; each result reaches its own write; a taken id writes none of its parts", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const admin = yield* Pg.connection(url)
      yield* Effect.promise(() =>
        admin.query(`CREATE TABLE audit_set (row_id text, title text); CREATE TABLE audit_row (row_id text, title text)`)
      )
      const proxy = yield* cuttingProxy(new URL(url))
      const results: Array<string> = []
      const { store } = yield* replica(proxy.url, true, {
        plugins: [auditPlugin("audit_set", true, results), auditPlugin("audit_row", false, results)]
      })
      yield* store.insert(Docs, { id: "m05", title: "before" })
      const writes = ids(20, "m")
      assert.deepStrictEqual(yield* burst(store, writes), writes.map((id) => id === "m05" ? `${id}:DuplicateRow` : `${id}:ok`))
      const texts = batchTexts(proxy.sent)
      assert.isAbove(texts.length, 0, "some statement of several rows")
      for (const text of texts) {
        const rows = count(text, `SELECT "id" FROM "row" WHERE "id" = `)
        assert.isAbove(rows, 1, "a CTE per row, for the part without a set form")
        assert.strictEqual(count(text, `INSERT INTO audit_row`), rows, "the part without a set form: per row")
        assert.strictEqual(count(text, `INSERT INTO audit_set`), 1, "the plugin's set form: once")
        assert.strictEqual(count(text, `INSERT INTO "_fw_row_history"`), 1)
        assert.strictEqual(count(text, `INSERT INTO _fw_change_outbox`), 1)
      }
      const titleOf = (id: string) => id === "m05" ? "before" : `t-${id}`
      for (const table of ["audit_set", "audit_row"]) {
        const written = yield* Effect.promise(() => admin.query(`SELECT row_id, title FROM ${table} ORDER BY row_id`))
        assert.deepStrictEqual(written.rows.map((r) => `${r.row_id}:${r.title}`), writes.map((id) => `${id}:${titleOf(id)}`), table)
        assert.deepStrictEqual(
          results.filter((r) => r.startsWith(`${table}:`)).sort(),
          writes.map((id) => `${table}:${id}:${id}:${titleOf(id)}`),
          `${table}: one result per write, its own`
        )
      }
      for (const id of writes) assert.deepStrictEqual(yield* versionsOf(store, id), [`1:insert:${titleOf(id)}`])
      const outbox = yield* Effect.promise(() => admin.query(`SELECT changes->0->>'id' AS id FROM _fw_change_outbox ORDER BY 1`))
      assert.deepStrictEqual(outbox.rows.map((r) => r.id), writes)
    }), 60_000)

  it.scopedLive("set form, fleet scope: each outbox result of a batch names its own row (the store's onResult per write), a taken id none", () =>
    Effect.gen(function*() {
      const url = yield* setUp
      const { tap } = yield* replica(url, true)
      const admin = yield* Pg.connection(url)
      yield* Effect.promise(() => admin.query(`INSERT INTO docs (id, title) VALUES ('o2', 'taken')`))
      const writes = ["o0", "o1", "o2", "o3", "o4", "o5"]
      const results = new Map<string, Readonly<Record<string, unknown>>>()
      const rows = writes.map((id, r) => {
        const change: ChangeEvent = {
          table: "docs",
          op: "insert",
          id,
          tenantId: null,
          before: null,
          after: { id, title: `t-${id}` },
          at: 1_000 + r,
          seq: 0,
          provenance: Provenance.system,
          ref: `ref-${id}`
        }
        const outbox = tap.fuse!([change])
        return {
          values: [id, `t-${id}`],
          parts: [versionPart(undefined, change), {
            ...outbox,
            onResult: (returned: Readonly<Record<string, unknown>>) => {
              assert.isFalse(results.has(id), `one result for ${id}`)
              results.set(id, returned)
              outbox.onResult!(returned)
            }
          }]
        }
      })
      const insert = `INSERT INTO "docs" ("id", "title") VALUES ${
        writes.map((_, r) => `($${2 * r + 1}, $${2 * r + 2})`).join(", ")
      } ON CONFLICT ("id") DO NOTHING RETURNING "id"`
      const batch = FusedStage.composeBatch(insert, rows, FusedStage.keysOf(rows[0]!.parts)!)
      const answer = yield* Effect.promise(() => admin.query(batch.text, batch.parameters as Array<unknown>))
      assert.deepStrictEqual(batch.answer(answer.rows[0]), writes.map((id) => id !== "o2"))
      const outbox = yield* Effect.promise(() =>
        admin.query(`SELECT id::text AS id, xid::text AS xid, changes->0->>'id' AS row FROM _fw_change_outbox`)
      )
      assert.strictEqual(outbox.rows.length, writes.length - 1)
      assert.deepStrictEqual([...results.keys()].sort(), writes.filter((id) => id !== "o2"))
      for (const row of outbox.rows) {
        const returned = results.get(row.row)!
        assert.deepStrictEqual([returned.id, returned.xid, returned[FusedStage.rowIdColumn]], [row.id, row.xid, row.row])
      }
      const versions = yield* Effect.promise(() =>
        admin.query(`SELECT "rowId", "version", "data"->>'title' AS title, "changedAt" FROM "_fw_row_history" ORDER BY "rowId"`)
      )
      assert.deepStrictEqual(
        versions.rows.map((v) => `${v.rowId}:${v.version}:${v.title}:${v.changedAt}`),
        writes.flatMap((id, r) => id === "o2" ? [] : [`${id}:1:t-${id}:${1_000 + r}`])
      )
    }), 60_000)
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
