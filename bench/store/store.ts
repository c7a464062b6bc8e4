/**
 * Store throughput: single inserts (one autocommitted write each), batched inserts (`insertMany`,
 * one transaction) and point reads per second, on the memory, SQLite (file) and PostgreSQL tiers,
 * against the raw driver doing the same work in the same run: better-sqlite3 prepared statements
 * and node-postgres. The store runs with a change tap that discards changes, so the figures are the
 * store's own cost (encoding, scoping, change recording, the SQL client), not listener delivery.
 *
 * Run: `npx tsx bench/store/store.ts` (PostgreSQL from FW_TEST_PG_URL or 127.0.0.1:5432).
 */
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import Database from "better-sqlite3"
import { Effect, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import pg from "pg"
import * as Store from "../../src/kernel/store/Store.js"
import { itemsTable, memoryTier, rawItemsDdl, sqlTier, withPgDatabase } from "./shared.js"

const Items = itemsTable("bench_items")

/** Operations per phase, per tier (PostgreSQL round trips are slower: fewer of them). */
interface Sizes {
  readonly single: number
  readonly batch: number
  readonly reads: number
}
const sizes = {
  memory: { single: 20_000, batch: 100_000, reads: 50_000 },
  sqlite: { single: 5_000, batch: 50_000, reads: 20_000 },
  pg: { single: 1_500, batch: 20_000, reads: 3_000 }
} satisfies Record<string, Sizes>

interface Rates {
  readonly insert: number
  readonly batched: number
  readonly read: number
}

const row = (prefix: string, i: number) => ({ id: `${prefix}-${String(i).padStart(8, "0")}`, tenantId: "t", name: `n${i}`, price: i })

const seconds = (start: number) => (performance.now() - start) / 1000

const measureStore = (n: Sizes) =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    const singles = (prefix: string, count: number) =>
      Effect.forEach(Array.from({ length: count }, (_, i) => row(prefix, i)), (r) => store.insert(Items, r), { discard: true })
    const reads = (prefix: string, count: number) =>
      Effect.forEach(Array.from({ length: count }, (_, i) => row(prefix, i).id), (id) => store.get(Items, id), { discard: true })
    // Warm-up: let the JIT and the statement caches settle before timing.
    yield* singles("w", Math.min(1_000, n.single))
    yield* reads("w", Math.min(1_000, n.reads))
    yield* store.insertMany(Items, Array.from({ length: 2_000 }, (_, i) => row("wb", i)))

    let start = performance.now()
    yield* singles("s", n.single)
    const insert = n.single / seconds(start)
    const batch = Array.from({ length: n.batch }, (_, i) => row("b", i))
    start = performance.now()
    yield* store.insertMany(Items, batch)
    const batched = n.batch / seconds(start)
    start = performance.now()
    yield* reads("s", n.reads)
    const read = n.reads / seconds(start)
    return { insert, batched, read } satisfies Rates
  })

const rawSqlite = (file: string, n: Sizes): Rates => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.exec(rawItemsDdl.sqlite)
  db.exec(rawItemsDdl.tenantIndex)
  const insert = db.prepare(`INSERT INTO raw_items (id, "tenantId", name, price) VALUES (?, ?, ?, ?)`)
  const select = db.prepare(`SELECT * FROM raw_items WHERE id = ?`)
  const put = (r: ReturnType<typeof row>) => insert.run(r.id, r.tenantId, r.name, r.price)
  for (let i = 0; i < 1_000; i++) put(row("w", i))
  for (let i = 0; i < 1_000; i++) select.get(row("w", i).id)

  let start = performance.now()
  for (let i = 0; i < n.single; i++) put(row("s", i))
  const single = n.single / seconds(start)
  const batch = Array.from({ length: n.batch }, (_, i) => row("b", i))
  start = performance.now()
  db.transaction(() => batch.forEach(put))()
  const batched = n.batch / seconds(start)
  start = performance.now()
  for (let i = 0; i < n.reads; i++) select.get(row("s", i).id)
  const read = n.reads / seconds(start)
  db.close()
  return { insert: single, batched, read }
}

const rawPg = async (url: string, n: Sizes): Promise<Rates> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query(rawItemsDdl.pg)
  await client.query(rawItemsDdl.tenantIndex)
  const put = (r: ReturnType<typeof row>) =>
    client.query(`INSERT INTO raw_items (id, "tenantId", name, price) VALUES ($1, $2, $3, $4)`, [r.id, r.tenantId, r.name, r.price])
  const get = (id: string) => client.query(`SELECT * FROM raw_items WHERE id = $1`, [id])
  for (let i = 0; i < 200; i++) await put(row("w", i))
  for (let i = 0; i < 200; i++) await get(row("w", i).id)

  let start = performance.now()
  for (let i = 0; i < n.single; i++) await put(row("s", i))
  const single = n.single / seconds(start)
  // The same shape as the store's batches: multi-row INSERTs of 500 rows in one transaction.
  start = performance.now()
  await client.query("BEGIN")
  for (let i = 0; i < n.batch; i += 500) {
    const values: Array<unknown> = []
    const tuples: Array<string> = []
    for (let j = i; j < Math.min(n.batch, i + 500); j++) {
      const r = row("b", j)
      const at = values.length
      tuples.push(`($${at + 1}, $${at + 2}, $${at + 3}, $${at + 4})`)
      values.push(r.id, r.tenantId, r.name, r.price)
    }
    await client.query(`INSERT INTO raw_items (id, "tenantId", name, price) VALUES ${tuples.join(", ")}`, values)
  }
  await client.query("COMMIT")
  const batched = n.batch / seconds(start)
  start = performance.now()
  for (let i = 0; i < n.reads; i++) await get(row("s", i).id)
  const read = n.reads / seconds(start)
  await client.end()
  return { insert: single, batched, read }
}

const format = (n: number) => Math.round(n).toLocaleString("en-US")

/** Measures every tier and prints one line per tier and operation. */
export const run = async () => {
  const lines: Array<Record<string, string>> = []
  const add = (tier: string, fw: Rates, raw: Rates | undefined, peer: string) => {
    for (const [operation, key] of [["insert (single)", "insert"], ["insert (batched)", "batched"], ["point read", "read"]] as const) {
      lines.push({
        tier,
        operation,
        "fw ops/s": format(fw[key]),
        [`raw ops/s`]: raw === undefined ? "-" : format(raw[key]),
        "fw/raw": raw === undefined ? "-" : (fw[key] / raw[key]).toFixed(2),
        peer
      })
    }
  }
  add("memory", await Effect.runPromise(measureStore(sizes.memory).pipe(Effect.provide(memoryTier))), undefined, "-")

  const dir = mkdtempSync(path.join(tmpdir(), "fw-bench-store-"))
  try {
    const fw = await Effect.runPromise(
      measureStore(sizes.sqlite).pipe(Effect.provide(sqlTier(Items, SqliteClient.layer({ filename: path.join(dir, "fw.db") }))))
    )
    add("sqlite (file, WAL)", fw, rawSqlite(path.join(dir, "raw.db"), sizes.sqlite), "better-sqlite3")
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }

  try {
    await withPgDatabase("store", async (url) => {
      const fw = await Effect.runPromise(
        measureStore(sizes.pg).pipe(Effect.provide(sqlTier(Items, PgClient.layer({ url: Redacted.make(url) }))))
      )
      add("postgresql", fw, await rawPg(url, sizes.pg), "pg")
    })
  } catch (error) {
    console.warn(`PostgreSQL not measured: ${String(error)}`)
  }
  console.log("\nstore throughput (fw = the Store service; raw = the bare driver, same run)")
  console.table(lines)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
