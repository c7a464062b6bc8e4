/**
 * Single operations through `Store` (a point read by id, a one-row insert outside a transaction)
 * against the raw driver running the same statements, in alternating batches in one process (a
 * loaded shared machine distorts sequential phases far more): SQLite (file, WAL) against
 * better-sqlite3, PostgreSQL against one node-postgres client, and the memory tier's reads.
 *
 * Besides wall time it reports this process's CPU time per operation (user + system, all
 * threads): on a machine shared with other work that is the steadier measure of what the
 * framework adds. PostgreSQL's own CPU is not in it.
 *
 * `npx tsx bench/store/single.ts` (PostgreSQL from FW_TEST_PG_URL or 127.0.0.1:5432; skipped if down).
 * `BENCH_SINGLE_TIERS=pg` (a comma list of `memory`, `sqlite`, `pg`) measures only those tiers.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import Database from "better-sqlite3"
import { Effect, type Layer, ManagedRuntime, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import pg from "pg"
import * as Store from "../../src/kernel/store/Store.js"
import { itemsTable, memoryTier, rawItemsDdl, sqlTier, withPgDatabase } from "./shared.js"

const Items = itemsTable("bench_single_items")
const seeded = 1_000
const idOf = (i: number) => `item-${String(i % seeded).padStart(6, "0")}`
const seed = Array.from({ length: seeded }, (_, i) => ({ id: idOf(i), tenantId: "t", name: `n${i}`, price: i }))

/** One batch of `n` operations; resolves when done. */
type Batch = (n: number) => Promise<void>

interface Totals {
  wallMs: number
  cpuMs: number
  ops: number
}

/**
 * Runs the batches of every contender in turn, `rounds` times, after `warmUp` untimed rounds (a
 * server runs its store paths long after the JIT compiled them).
 */
const alternate = async (contenders: Record<string, Batch>, size: number, rounds: number, warmUp = 1) => {
  const totals: Record<string, Totals> = {}
  for (const name of Object.keys(contenders)) totals[name] = { wallMs: 0, cpuMs: 0, ops: 0 }
  for (let round = 0; round < warmUp; round++) for (const batch of Object.values(contenders)) await batch(size)
  for (let round = 0; round < rounds; round++) {
    for (const [name, batch] of Object.entries(contenders)) {
      const cpu = process.cpuUsage()
      const start = performance.now()
      await batch(size)
      const wall = performance.now() - start
      const used = process.cpuUsage(cpu)
      const total = totals[name]!
      total.wallMs += wall
      total.cpuMs += (used.user + used.system) / 1000
      total.ops += size
    }
  }
  return totals
}

const lines: Array<Record<string, string | number>> = []
const report = (operation: string, totals: Record<string, Totals>, peer: string | undefined) => {
  const base = peer === undefined ? undefined : totals[peer]!
  for (const [name, t] of Object.entries(totals)) {
    lines.push({
      operation,
      who: name,
      "ops/s": Math.round(t.ops / (t.wallMs / 1000)).toLocaleString("en-US"),
      "µs/op": Number((t.wallMs * 1000 / t.ops).toFixed(2)),
      "CPU µs/op": Number((t.cpuMs * 1000 / t.ops).toFixed(2)),
      "vs raw (wall)": base === undefined ? "-" : (base.wallMs / t.wallMs).toFixed(2),
      "vs raw (CPU)": base === undefined ? "-" : (base.cpuMs / t.cpuMs).toFixed(2)
    })
  }
}

/** Batches of `Store.get` and `Store.insert` over a seeded store built from `layer`. */
const storeBatches = async (layer: Layer.Layer<Store.Store, unknown>) => {
  const runtime = ManagedRuntime.make(layer)
  await runtime.runPromise(Effect.flatMap(Store.Store, (store) => store.insertMany(Items, seed)))
  let next = 0
  const read = (n: number) =>
    runtime.runPromise(Effect.flatMap(Store.Store, (store) =>
      Effect.gen(function*() {
        for (let i = 0; i < n; i++) yield* store.get(Items, idOf(i))
      })))
  const insert = (n: number) =>
    runtime.runPromise(Effect.flatMap(Store.Store, (store) =>
      Effect.gen(function*() {
        for (let i = 0; i < n; i++) {
          const k = next++
          yield* store.insert(Items, { id: `new-${k}`, tenantId: "t", name: `n${k}`, price: k })
        }
      })))
  return { read, insert, dispose: () => runtime.dispose() }
}

const itemsTier = (client: Layer.Layer<SqlClient.SqlClient, unknown>) => sqlTier(Items, client)

const sqlite = async (dir: string) => {
  const db = new Database(path.join(dir, "raw.db"))
  db.pragma("journal_mode = WAL")
  db.exec(rawItemsDdl.sqlite)
  db.exec(rawItemsDdl.tenantIndex)
  // The statements the store sends: its one-row insert refuses a duplicate id without an error.
  const insert = db.prepare(
    `INSERT INTO raw_items (id, "tenantId", name, price) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id`
  )
  const select = db.prepare(`SELECT * FROM raw_items WHERE id = ?`)
  db.transaction(() => seed.forEach((r) => insert.get(r.id, r.tenantId, r.name, r.price)))()
  const fw = await storeBatches(itemsTier(SqliteClient.layer({ filename: path.join(dir, "fw.db") })))
  let next = 0
  const reads = await alternate({
    "SQLite Store.get": fw.read,
    "raw better-sqlite3": async (n) => {
      for (let i = 0; i < n; i++) select.get(idOf(i))
    }
  }, 1_000, 20)
  report("point read (SQLite)", reads, "raw better-sqlite3")
  const inserts = await alternate({
    "SQLite Store.insert": fw.insert,
    "raw better-sqlite3": async (n) => {
      for (let i = 0; i < n; i++) {
        const k = next++
        insert.get(`new-${k}`, "t", `n${k}`, k)
      }
    }
  }, 200, 10)
  report("insert, one row (SQLite)", inserts, "raw better-sqlite3")
  await fw.dispose()
  db.close()
}

const memory = async () => {
  const fw = await storeBatches(memoryTier)
  report("point read (memory)", await alternate({ "memory Store.get": fw.read }, 10_000, 20), undefined)
  await fw.dispose()
}

const postgres = () =>
  withPgDatabase("single", async (url) => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query(rawItemsDdl.pg)
    await client.query(rawItemsDdl.tenantIndex)
    const put = (id: string, k: number) =>
      client.query(
        `INSERT INTO raw_items (id, "tenantId", name, price) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING RETURNING id`,
        [id, "t", `n${k}`, k]
      )
    for (let i = 0; i < seeded; i++) await put(idOf(i), i)
    const fw = await storeBatches(itemsTier(PgClient.layer({ url: Redacted.make(url) })))
    let next = 0
    const reads = await alternate({
      "PostgreSQL Store.get": fw.read,
      "raw pg": async (n) => {
        for (let i = 0; i < n; i++) await client.query(`SELECT * FROM raw_items WHERE id = $1`, [idOf(i)])
      }
    }, 200, 20, 10)
    report("point read (PostgreSQL)", reads, "raw pg")
    const inserts = await alternate({
      "PostgreSQL Store.insert": fw.insert,
      "raw pg": async (n) => {
        for (let i = 0; i < n; i++) {
          const k = next++
          await put(`new-${k}`, k)
        }
      }
    }, 100, 6, 3)
    report("insert, one row (PostgreSQL)", inserts, "raw pg")
    await fw.dispose()
    await client.end()
  })

/** Measures every tier and prints one table. */
export const run = async () => {
  lines.length = 0
  const tiers = new Set((process.env.BENCH_SINGLE_TIERS ?? "memory,sqlite,pg").split(","))
  if (tiers.has("memory")) await memory()
  if (tiers.has("sqlite")) {
    const dir = mkdtempSync(path.join(tmpdir(), "fw-bench-single-"))
    try {
      await sqlite(dir)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  if (tiers.has("pg")) {
    try {
      await postgres()
    } catch (error) {
      console.warn(`PostgreSQL not measured: ${String(error)}`)
    }
  }
  console.log("\nsingle store operations against the raw driver, alternating batches (same run)")
  console.table(lines)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
