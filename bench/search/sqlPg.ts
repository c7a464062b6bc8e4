/**
 * The sql backend on PostgreSQL at 200,000 rows (`BENCH_SEARCH_SQL_ROWS`): query p50 of a two-term
 * query with a typo (fuzziness 1), the tenant filter and two facets; the memory backend answers the
 * same queries over the same documents in the same run, as the peer. Aim: p50 under 50 ms.
 * `BENCH_KEEP_DB=1` keeps the database for `EXPLAIN ANALYZE`.
 *
 * Figures (2-core box shared with other jobs, so noisy): before the query moved into SQL and the
 * backend analyzed its table, p50 63–162 ms (PostgreSQL, without statistics, walked the whole
 * index through the btree); after, p50 39 ms, p95 109 ms (memory peer 1.2 ms) in the same run.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import pg from "pg"
import * as Memory from "../../src/search/Memory.js"
import type { Query } from "../../src/search/SearchBackend.js"
import * as Sql from "../../src/search/Sql.js"
import { table } from "../support.js"
import { corpus } from "./memory.js"

const N = Number(process.env.BENCH_SEARCH_SQL_ROWS ?? 200_000)
const adminUrl = process.env.FW_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

const percentile = (samples: Array<number>, p: number) => [...samples].sort((a, b) => a - b)[Math.floor(samples.length * p)]!

export const run = async () => {
  const name = `fw_bench_search_${Date.now().toString(36)}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  try {
    const { docs, queries } = corpus(N, 7)
    const spec = { index: "bench", tenantField: "tenantId", searchableFields: ["title", "body"] }
    const typo = (word: string) => word.length > 4 ? word.slice(0, 2) + word.slice(3) : word
    const toQuery = (a: string, b: string, i: number): Query => ({
      q: `${typo(a)} ${b}`,
      limit: 20,
      offset: 0,
      fuzziness: 1,
      filters: [{ field: "tenantId", op: "eq", value: `t${i % 10}` }],
      facets: ["brand", "year"],
      engineParams: {}
    })
    await Effect.runPromise(Effect.gen(function*() {
      const backend = yield* Sql.make
      yield* backend.ensureIndex!(spec)
      const start = performance.now()
      for (let i = 0; i < docs.length; i += 1000) yield* backend.upsert("bench", docs.slice(i, i + 1000))
      const build = performance.now() - start
      // Warm-up (the first fuzzy query loads the vocabulary), then the measured queries; the memory
      // peer is built afterwards so its heap does not weigh on the sql timings.
      for (const [i, [a, b]] of queries.slice(100, 110).entries()) yield* backend.query("bench", toQuery(a, b, i))
      const sqlTimes: Array<number> = []
      const memoryTimes: Array<number> = []
      let found = 0
      for (const [i, [a, b]] of queries.slice(0, 100).entries()) {
        const t0 = performance.now()
        const result = yield* backend.query("bench", toQuery(a, b, i))
        sqlTimes.push(performance.now() - t0)
        found += result.found
      }
      const memory = Memory.make()
      yield* memory.ensureIndex!(spec)
      yield* memory.upsert("bench", docs)
      for (const [i, [a, b]] of queries.slice(100, 110).entries()) yield* memory.query("bench", toQuery(a, b, i))
      for (const [i, [a, b]] of queries.slice(0, 100).entries()) {
        const t0 = performance.now()
        yield* memory.query("bench", toQuery(a, b, i))
        memoryTimes.push(performance.now() - t0)
      }
      table(`search sql backend on PostgreSQL, ${N.toLocaleString("en-US")} rows: 2-term query with a typo, fuzziness 1, tenant filter, 2 facets`, [
        { backend: "sql (PostgreSQL)", "p50 ms": percentile(sqlTimes, 0.5).toFixed(1), "p95 ms": percentile(sqlTimes, 0.95).toFixed(1), "load s": (build / 1000).toFixed(0), "hits/query": Math.round(found / sqlTimes.length) },
        { backend: "memory (peer, same docs)", "p50 ms": percentile(memoryTimes, 0.5).toFixed(1), "p95 ms": percentile(memoryTimes, 0.95).toFixed(1), "load s": "", "hits/query": "" },
        { backend: "ratio sql/memory", "p50 ms": (percentile(sqlTimes, 0.5) / percentile(memoryTimes, 0.5)).toFixed(1), "p95 ms": "", "load s": "", "hits/query": "" }
      ])
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url.toString()) }).pipe(Layer.orDie))))
  } finally {
    if (process.env.BENCH_KEEP_DB === undefined) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    else console.log(`kept database ${name}`)
    await admin.end()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
