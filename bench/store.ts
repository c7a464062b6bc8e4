/**
 * Store throughput: inserts (one per transaction, and batched) and point reads per second on the
 * memory, SQLite (file) and PostgreSQL tiers, against the raw driver (better-sqlite3 prepared
 * statements, node-postgres) doing the same writes and reads in the same run.
 */
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import Database from "better-sqlite3"
import { Effect, Layer, Redacted, Schema } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import pg from "pg"
import * as ChangeTap from "../src/kernel/ChangeTap.js"
import * as SchemaDiffer from "../src/kernel/SchemaDiffer.js"
import * as Store from "../src/kernel/Store.js"
import { defineTable } from "../src/kernel/Table.js"
import { perSecond, table } from "./support.js"

const Items = defineTable("bench_items", { fields: { tenantId: Schema.String, name: Schema.String, price: Schema.Number } })
const N = 2_000
const BATCH = 20_000
const pgUrl = process.env.FW_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

const rate = (count: number, ms: number) => count / (ms / 1000)
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = performance.now()
    yield* effect
    return performance.now() - start
  })

const measureFw = (prefix: string) =>
  Effect.gen(function*() {
    const store = yield* Store.Store
    const row = (i: number) => ({ id: `${prefix}-${i}`, tenantId: "t", name: `n${i}`, price: i })
    const single = yield* timed(Effect.forEach(Array.from({ length: N }, (_, i) => i), (i) => store.insert(Items, row(i)), { discard: true }))
    const batched = yield* timed(store.insertMany(Items, Array.from({ length: BATCH }, (_, i) => row(N + i))))
    const reads = yield* timed(Effect.forEach(Array.from({ length: N }, (_, i) => i), (i) => store.get(Items, `${prefix}-${i}`), { discard: true }))
    return { insert: rate(N, single), batched: rate(BATCH, batched), read: rate(N, reads) }
  })

const tier = (client: Layer.Layer<never, never, never> | Layer.Layer<import("@effect/sql").SqlClient.SqlClient, unknown>) =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provide(Layer.effectDiscard(SchemaDiffer.apply([Items])).pipe(Layer.provideMerge(client as Layer.Layer<import("@effect/sql").SqlClient.SqlClient, unknown>)))
  )

const rawSqlite = (file: string) => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.exec(`CREATE TABLE raw_items (id TEXT PRIMARY KEY, tenantId TEXT, name TEXT, price REAL)`)
  const insert = db.prepare("INSERT INTO raw_items (id, tenantId, name, price) VALUES (?, ?, ?, ?)")
  const select = db.prepare("SELECT * FROM raw_items WHERE id = ?")
  let start = performance.now()
  for (let i = 0; i < N; i++) insert.run(`r-${i}`, "t", `n${i}`, i)
  const single = rate(N, performance.now() - start)
  start = performance.now()
  db.transaction(() => { for (let i = 0; i < BATCH; i++) insert.run(`r-${N + i}`, "t", `n${i}`, i) })()
  const batched = rate(BATCH, performance.now() - start)
  start = performance.now()
  for (let i = 0; i < N; i++) select.get(`r-${i}`)
  const read = rate(N, performance.now() - start)
  db.close()
  return { insert: single, batched, read }
}

const rawPg = async (url: string) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query(`CREATE TABLE raw_items (id TEXT PRIMARY KEY, "tenantId" TEXT, name TEXT, price DOUBLE PRECISION)`)
  let start = performance.now()
  for (let i = 0; i < N; i++) await client.query(`INSERT INTO raw_items VALUES ($1, $2, $3, $4)`, [`r-${i}`, "t", `n${i}`, i])
  const single = rate(N, performance.now() - start)
  start = performance.now()
  await client.query("BEGIN")
  for (let i = 0; i < BATCH; i += 500) {
    const values: Array<unknown> = []
    const tuples: Array<string> = []
    for (let j = i; j < Math.min(BATCH, i + 500); j++) {
      tuples.push(`($${values.length + 1}, $${values.length + 2}, $${values.length + 3}, $${values.length + 4})`)
      values.push(`r-${N + j}`, "t", `n${j}`, j)
    }
    await client.query(`INSERT INTO raw_items VALUES ${tuples.join(", ")}`, values)
  }
  await client.query("COMMIT")
  const batched = rate(BATCH, performance.now() - start)
  start = performance.now()
  for (let i = 0; i < N; i++) await client.query(`SELECT * FROM raw_items WHERE id = $1`, [`r-${i}`])
  const read = rate(N, performance.now() - start)
  await client.end()
  return { insert: single, batched, read }
}

const withPgDatabase = async <A>(f: (url: string) => Promise<A>): Promise<A> => {
  const name = `fw_bench_${Date.now().toString(36)}`
  const admin = new pg.Client({ connectionString: pgUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  const url = new URL(pgUrl)
  url.pathname = `/${name}`
  try {
    return await f(url.toString())
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
  }
}

export const run = async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "fw-bench-"))
  const rows: Array<Record<string, string | number>> = []
  const add = (tierName: string, fw: { insert: number; batched: number; read: number }, raw?: { insert: number; batched: number; read: number }) => {
    rows.push({
      tier: tierName,
      "insert/s": perSecond(fw.insert),
      "batched insert/s": perSecond(fw.batched),
      "point read/s": perSecond(fw.read),
      ...(raw
        ? {
          "insert vs raw": Number((fw.insert / raw.insert).toFixed(2)),
          "batched vs raw": Number((fw.batched / raw.batched).toFixed(2)),
          "read vs raw": Number((fw.read / raw.read).toFixed(2))
        }
        : {})
    })
  }
  add("memory", await Effect.runPromise(measureFw("m").pipe(Effect.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))))))
  const sqliteFw = await Effect.runPromise(measureFw("s").pipe(Effect.provide(tier(SqliteClient.layer({ filename: path.join(dir, "fw.db") })))))
  add("sqlite (file)", sqliteFw, rawSqlite(path.join(dir, "raw.db")))
  try {
    await withPgDatabase(async (url) => {
      const fw = await Effect.runPromise(measureFw("p").pipe(Effect.provide(tier(PgClient.layer({ url: Redacted.make(url) })))))
      add("postgresql", fw, await rawPg(url))
    })
  } catch (error) {
    console.warn(`PostgreSQL not measured: ${String(error)}`)
  }
  table(`store throughput (${N} single inserts, ${BATCH} batched, ${N} point reads)`, rows)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
