/**
 * Incremental aggregates (spec 3.7): a seeded random sequence of inserts, updates (group moves
 * included) and deletes, checked after every step against a full recomputation, for every op with
 * and without groupBy, on every tier. PostgreSQL: concurrent writers on one group stay exact.
 * The full 10,000-step run is `bench/aggregates/soak.ts`.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Schema, Scope } from "effect"
import type * as Aggregate from "../../src/aggregates/Aggregate.js"
import { defineAggregate } from "../../src/aggregates/index.js"
import type * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import { Store } from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"
import { check, incrementalAggregates, writer } from "./randomized.js"
import type { OrderRow } from "./randomized.js"
import { base, Orders, scheduler, tiers } from "./support.js"

/** Steps per tier here (every op and both shapes run on each step); the soak runs 10,000 per tier. */
const steps = { memory: 1_000, sqlite: 300, pg: 120 } as const

for (const tier of tiers) {
  describe(`incremental aggregates: ${tier.name}`, () => {
    it.scoped(`random inserts, updates (group moves) and deletes match a full recomputation after each of ${steps[tier.name]} steps, for every op with and without groupBy`, () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const store = Context.get(ctx, Store)
        const orders = writer(store, 42)
        // Rows written before boot are picked up by the first build.
        for (let i = 0; i < 30; i++) yield* orders.step
        const aggregates = incrementalAggregates()
        const s = yield* scheduler(tier.name, ctx, aggregates)
        yield* s.booted
        yield* check(s, aggregates, orders.mirror.values(), "boot")
        for (let i = 0; i < steps[tier.name]; i++) {
          yield* orders.step
          yield* check(s, aggregates, orders.mirror.values(), `step ${i}`)
        }
        // A transaction that rolls back leaves every aggregate untouched.
        const failed = yield* Effect.exit(store.transaction(Effect.zipRight(
          store.insert(Orders, { id: "rolled-back", g: "a", h: true, x: -100 }),
          Effect.fail("abort")
        )))
        assert.isTrue(Exit.isFailure(failed))
        yield* check(s, aggregates, orders.mirror.values(), "a rollback")
        const meta = yield* s.meta("count_grouped")
        assert.strictEqual(meta.lastError, null)
      }), 60_000)

    it.scoped("transactions of many random changes (several per group, moves, deletes of rows written in the same transaction) match a recomputation after each commit", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const store = Context.get(ctx, Store)
        const orders = writer(store, 7)
        const aggregates = incrementalAggregates()
        const s = yield* scheduler(tier.name, ctx, aggregates)
        yield* s.booted
        for (let batch = 0; batch < 12; batch++) {
          yield* store.transaction(Effect.gen(function*() {
            for (let i = 0; i < 15; i++) yield* orders.step
          }))
          yield* check(s, aggregates, orders.mirror.values(), `transaction ${batch}`)
        }
      }), 60_000)

    if (tier.name !== "memory") {
      it.scoped("maintained by database triggers: raw SQL writes are counted too; an aggregate no longer declared loses its triggers", () =>
        Effect.gen(function*() {
          const ctx = yield* base(tier)
          const sql = Context.get(ctx as Context.Context<SqlClient.SqlClient>, SqlClient.SqlClient)
          const aggregates = incrementalAggregates()
          const first = yield* Scope.make()
          const s = yield* scheduler(tier.name, ctx, aggregates, first)
          yield* s.booted
          const h = (b: boolean) => tier.name === "pg" ? b : b ? 1 : 0
          yield* sql`INSERT INTO orders (id, g, h, x) VALUES ('raw1', 'a', ${h(true)}, 4), ('raw2', 'b', ${h(false)}, NULL), ('raw3', 'a', ${h(true)}, 9)`
          yield* sql`UPDATE orders SET x = 1, g = 'c' WHERE id = 'raw3'`
          yield* sql`DELETE FROM orders WHERE id = 'raw1'`
          const rows: ReadonlyArray<OrderRow> = [{ id: "raw2", g: "b", h: false, x: null }, { id: "raw3", g: "c", h: true, x: 1 }]
          yield* check(s, aggregates, rows, "raw SQL writes")
          yield* Scope.close(first, Exit.void)

          // The next boot declares only count_all: the others' triggers are dropped.
          const triggers = tier.name === "pg"
            ? sql<{ readonly name: string }>`SELECT tgname AS name FROM pg_trigger WHERE tgname LIKE '%fw_agg%' ORDER BY tgname`
            : sql<{ readonly name: string }>`SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name`
          assert.isAbove((yield* triggers).length, 5)
          const second = yield* Scope.make()
          yield* scheduler(tier.name, ctx, aggregates.filter((a) => a.name === "count_all"), second)
          assert.deepStrictEqual((yield* triggers).map((t) => t.name), tier.name === "pg" ? ["_fw_agg_count_all"] : ["_fw_agg_count_all_del", "_fw_agg_count_all_ins"])
          yield* Scope.close(second, Exit.void)
        }), 60_000)
    }

    if (tier.name !== "memory") {
      it.scoped("boot creates triggers only when missing or changed: an unchanged boot runs no DDL; a changed definition is replaced and rebuilt; a dropped trigger is restored and its aggregate rebuilt", () =>
        Effect.gen(function*() {
          const ctx = yield* base(tier)
          const sql = Context.get(ctx as Context.Context<SqlClient.SqlClient>, SqlClient.SqlClient)
          const store = Context.get(ctx, Store)
          const orders = writer(store, 11)
          // Where DDL would show: SQLite's schema_version moves with every schema change; on
          // PostgreSQL each trigger's oid and its function's row version (CREATE OR REPLACE writes a new one).
          const fingerprint = tier.name === "pg"
            ? sql<{ readonly name: string; readonly v: string }>`SELECT t.tgname AS name, t.oid::text || '/' || p.xmin::text AS v
              FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid WHERE t.tgname LIKE '%fw_agg%' ORDER BY t.tgname`
            : sql<{ readonly name: string; readonly v: string }>`SELECT 'schema' AS name, schema_version AS v FROM pragma_schema_version()`
          const boot = (aggregates: ReadonlyArray<Aggregate.Any>) =>
            Effect.gen(function*() {
              const scope = yield* Scope.make()
              const s = yield* scheduler(tier.name, ctx, aggregates, scope)
              yield* s.booted
              for (let i = 0; i < 20; i++) yield* orders.step
              yield* check(s, aggregates, orders.mirror.values(), "after boot")
              yield* Scope.close(scope, Exit.void)
            })
          const aggregates = incrementalAggregates()
          yield* boot(aggregates)
          const installed = yield* fingerprint

          // The same declaration: no DDL.
          yield* boot(aggregates)
          assert.deepStrictEqual(yield* fingerprint, installed)

          // sum_grouped redefined under the same name (max of x by g): its triggers are replaced
          // (only its own on PostgreSQL) and its state, kept for the old definition, is rebuilt.
          const redefined = aggregates.map((a) =>
            a.name !== "sum_grouped" ? a : defineAggregate({
              name: "sum_grouped",
              output: Schema.Struct({ g: Schema.String, h: Schema.Boolean, value: Schema.NullOr(Schema.Number) }),
              incremental: { source: "orders", op: "max", column: "x", groupBy: ["g"], toRow: ({ group, value }) => ({ g: group.g as string, h: false, value }) }
            })
          )
          yield* boot(redefined)
          const replaced = yield* fingerprint
          if (tier.name === "pg") {
            const changed = replaced.filter((t) => installed.find((u) => u.name === t.name)?.v !== t.v).map((t) => t.name)
            assert.deepStrictEqual(changed, ["_fw_agg_sum_grouped"])
          } else {
            assert.notDeepEqual(replaced, installed)
          }
          yield* boot(redefined)
          assert.deepStrictEqual(yield* fingerprint, replaced)

          // A trigger dropped behind the framework's back (writes meanwhile are missed): the next
          // boot restores it and rebuilds that aggregate from the source.
          yield* sql.unsafe(tier.name === "pg" ? `DROP TRIGGER "_fw_agg_count_all" ON orders` : `DROP TRIGGER "_fw_agg_count_all_ins"`)
          for (let i = 0; i < 10; i++) yield* orders.step
          yield* boot(redefined)
          assert.strictEqual((yield* fingerprint).length, replaced.length)
        }), 60_000)
    }

    it.scoped("restart: a persistent incremental aggregate keeps its state (no rebuild); async rebuilds from the source", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const store = Context.get(ctx, Store)
        const orders = writer(store, 7)
        const aggregates = incrementalAggregates()
        const first = yield* Scope.make()
        const s1 = yield* scheduler(tier.name, ctx, aggregates, first)
        yield* s1.booted
        for (let i = 0; i < 25; i++) yield* orders.step
        yield* Scope.close(first, Exit.void)
        const s2 = yield* scheduler(tier.name, ctx, aggregates)
        yield* s2.booted
        if (tier.name !== "memory") yield* check(s2, aggregates, orders.mirror.values(), "restart")
        assert.strictEqual(yield* s2.refresh("min_grouped"), "refreshed")
        for (let i = 0; i < 25; i++) yield* orders.step
        yield* check(s2, aggregates, orders.mirror.values(), "after restart")
      }))
  })
}

if (Pg.serverUrl !== null) {
  describe("incremental aggregates: postgresql, concurrent writers", () => {
    /** A fresh database's store and a booted scheduler of every incremental aggregate. */
    const booted = Effect.gen(function*() {
      const ctx = yield* base({ name: "pg", client: () => Pg.layerFreshClient })
      const aggregates = incrementalAggregates()
      const s = yield* scheduler("pg", ctx as Context.Context<Store | ChangeTap.ChangeTap | SqlClient.SqlClient>, aggregates)
      yield* s.booted
      return { aggregates, s, store: Context.get(ctx, Store) }
    })

    it.scoped("eight writers on the same groups: no lost update, extremes exact", () =>
      Effect.gen(function*() {
        const { aggregates, s, store } = yield* booted
        // Eight writers with their own ids (o<1000w+n>), on the same six groups.
        yield* Effect.forEach([0, 1, 2, 3, 4, 5, 6, 7], (w) =>
          Effect.gen(function*() {
            const mine = writer(store, 100 + w, 1000 * w)
            for (let i = 0; i < 15; i++) yield* mine.step
          }), { concurrency: "unbounded", discard: true })
        const rows = (yield* store.find(Orders)) as ReadonlyArray<OrderRow>
        assert.isAbove(rows.length, 0)
        yield* check(s, aggregates, rows, "concurrent writers")
      }))

    it.scoped("rows moved between two groups in opposite directions at once: no deadlock, counts exact", () =>
      Effect.gen(function*() {
        const { aggregates, s, store } = yield* booted
        // Each move's trigger leaves the row's old group and enters its new one, locking both group
        // rows: a move a → b and a move b → a at the same moment must not take them in opposite orders.
        const perSide = 24
        const rows = new Map<string, OrderRow>()
        for (let i = 0; i < 2 * perSide; i++) {
          const row: OrderRow = { id: `m${i}`, g: i < perSide ? "a" : "b", h: false, x: i }
          rows.set(row.id, row)
          yield* store.insert(Orders, row)
        }
        const failures: Array<string> = []
        for (let round = 0; round < 6; round++) {
          yield* Effect.forEach([...rows.values()], (row) => {
            const g = row.g === "a" ? "b" : "a"
            rows.set(row.id, { ...row, g })
            return store.update(Orders, row.id, { g }).pipe(Effect.catchAll((error) => Effect.sync(() => void failures.push(error.message))))
          }, { concurrency: "unbounded", discard: true })
        }
        assert.deepStrictEqual(failures, [])
        yield* check(s, aggregates, rows.values(), "opposite moves")
      }))
  })
}
