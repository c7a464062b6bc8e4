/** Scratch: CPU profile of per-change maintenance on SQLite (not registered). */
import { Context, Effect, Schema } from "effect"
import { SqlClient as Sql } from "@effect/sql"
import { defineAggregate } from "../../src/aggregates/index.js"
import { Store } from "../../src/kernel/Store.js"
import { defineTable } from "../../src/kernel/Table.js"
import { base, client, scheduler } from "./stack.js"

const tier = (process.env.TIER ?? "sqlite") as "sqlite" | "pg"
const withAgg = process.env.AGG !== "0"
const Source = defineTable("source", { fields: { g: Schema.String, x: Schema.Number }, indexes: [["g", "x"]] })
const Out = Schema.Struct({ g: Schema.String, value: Schema.NullOr(Schema.Number) })
const toRow = ({ group, value }: { readonly group: Readonly<Record<string, unknown>>; readonly value: number | null }) => ({ g: group.g as string, value })
const aggs = withAgg ? [
  defineAggregate({ name: "s", output: Out, incremental: { source: "source", op: "sum", column: "x", groupBy: ["g"], toRow } }),
  defineAggregate({ name: "m", output: Out, incremental: { source: "source", op: "max", column: "x", groupBy: ["g"], toRow } })
] : []
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const ctx = yield* base(yield* client(tier), [Source])
  const sql = Context.get(ctx as Context.Context<Sql.SqlClient>, Sql.SqlClient)
  yield* sql.unsafe(`INSERT INTO source (id, g, x) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 10000) SELECT 'r' || i, 'g' || (i % 100), i FROM s`)
  const s = yield* scheduler(tier, ctx, aggs, [Source])
  yield* s.booted
  const store = Context.get(ctx, Store)
  const n = Number(process.env.N ?? 3000)
  const start = performance.now()
  for (let i = 0; i < n; i++) yield* store.update(Source, `r${1 + (i * 7919) % 10000}`, { x: 20000 + i })
  console.log(tier, withAgg ? "with" : "without", ((performance.now() - start) / n).toFixed(3), "ms/change")
})))
