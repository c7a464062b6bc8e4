/**
 * Declared `indexes` (spec 2.13) become B-tree indexes on SQL stores: partial expression indexes on
 * `_fw_aggregate_rows` over the aggregate's output columns, created at boot, dropped when no longer
 * declared, and untouched for other aggregates.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Schema, Scope } from "effect"
import { defineAggregate } from "../../src/aggregates/index.js"
import { outputIndexName } from "../../src/aggregates/Storage.js"
import { base, scheduler, tiers } from "./support.js"

const Row = Schema.Struct({ day: Schema.String, status: Schema.String, orders: Schema.Number })

const define = (name: string, indexes: ReadonlyArray<ReadonlyArray<"day" | "status" | "orders">>) =>
  defineAggregate({
    name,
    refresh: "1h",
    output: Row,
    indexes,
    bootRefresh: "sync",
    build: () => [{ day: "2025-01-01", status: "open", orders: 3 }, { day: "2025-01-02", status: "late", orders: 1 }]
  })

for (const tier of tiers.filter((t) => t.name !== "memory")) {
  describe(`aggregate indexes: ${tier.name}`, () => {
    it.scoped("declared indexes exist after boot, follow the declaration on the next boot, and serve lookups", () =>
      Effect.gen(function*() {
        const ctx = yield* base(tier)
        const sql = Context.get(ctx, SqlClient.SqlClient)
        const indexes = () =>
          tier.name === "pg"
            ? sql<{ readonly name: string; readonly definition: string }>`SELECT indexname AS name, indexdef AS definition
                FROM pg_indexes WHERE tablename = '_fw_aggregate_rows' ORDER BY indexname`
            : sql<{ readonly name: string; readonly definition: string }>`SELECT name, sql AS definition
                FROM sqlite_master WHERE type = 'index' AND tbl_name = '_fw_aggregate_rows' ORDER BY name`
        const named = (rows: ReadonlyArray<{ readonly name: string }>) => rows.map((r) => r.name).filter((n) => n.startsWith("_fw_agg_"))

        const first = yield* Scope.make()
        yield* scheduler(tier.name, ctx, [define("perDay", [["day"], ["status", "day"]]), define("other", [["orders"]])], first)
        const created = yield* indexes()
        assert.deepStrictEqual(named(created).sort(), [
          outputIndexName("other", ["orders"]),
          outputIndexName("perDay", ["day"]),
          outputIndexName("perDay", ["status", "day"])
        ].sort())
        const statusDay = created.find((r) => r.name === outputIndexName("perDay", ["status", "day"]))!.definition
        assert.include(statusDay, "perDay")
        assert.include(statusDay, tier.name === "pg" ? "btree" : "json_extract(row, '$.status')")
        yield* Scope.close(first, Exit.void)

        // Next boot: one index no longer declared is dropped; the other aggregate's stays.
        const second = yield* Scope.make()
        yield* scheduler(tier.name, ctx, [define("perDay", [["day"]]), define("other", [["orders"]])], second)
        assert.deepStrictEqual(named(yield* indexes()).sort(), [outputIndexName("other", ["orders"]), outputIndexName("perDay", ["day"])].sort())
        yield* Scope.close(second, Exit.void)

        if (tier.name === "sqlite") {
          const plan = yield* sql<{ readonly detail: string }>`EXPLAIN QUERY PLAN SELECT row FROM _fw_aggregate_rows
            WHERE aggregate = 'perDay' AND generation = 2 AND json_extract(row, '$.day') = '2025-01-02'`
          assert.include(plan.map((p) => p.detail).join(" "), outputIndexName("perDay", ["day"]))
        }
      }))
  })
}
