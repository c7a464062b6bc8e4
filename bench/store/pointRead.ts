/**
 * Point reads through `Store.get`, in alternating batches in one process (a loaded shared machine
 * distorts sequential phases far more): the memory tier, the SQLite tier, and raw better-sqlite3
 * running the same prepared SELECT. Each batch goes through `runPromise` (a fiber per batch of
 * 1,000); bench/store/memoryReads.ts reads in one Effect, without that cost.
 *
 * `npx tsx bench/store/pointRead.ts`
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import Database from "better-sqlite3"
import { Effect, type Layer, ManagedRuntime } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as Store from "../../src/kernel/store/Store.js"
import { itemsTable, memoryTier, rawItemsDdl, sqlTier } from "./shared.js"

const Items = itemsTable("bench_point_items")
const rows = 1_000
const batch = 1_000
const rounds = 20
const idOf = (i: number) => `item-${String(i % rows).padStart(6, "0")}`
const seed = Array.from({ length: rows }, (_, i) => ({ id: idOf(i), tenantId: "t", name: `n${i}`, price: i }))

/** A runner of batches of `Store.get` over `layer`, seeded. */
const storeReader = async (layer: Layer.Layer<Store.Store, unknown>) => {
  const runtime = ManagedRuntime.make(layer)
  const read = Effect.gen(function*() {
    const store = yield* Store.Store
    for (let i = 0; i < batch; i++) yield* store.get(Items, idOf(i))
  })
  await runtime.runPromise(Effect.flatMap(Store.Store, (store) => store.insertMany(Items, seed)))
  return async () => {
    const start = performance.now()
    await runtime.runPromise(read)
    return performance.now() - start
  }
}

const sqlite = (file: string) => sqlTier(Items, SqliteClient.layer({ filename: file }))

export const run = async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "fw-bench-point-"))
  try {
    const db = new Database(path.join(dir, "raw.db"))
    db.pragma("journal_mode = WAL")
    db.exec(rawItemsDdl.sqlite)
    const insert = db.prepare(`INSERT INTO raw_items (id, "tenantId", name, price) VALUES (?, ?, ?, ?)`)
    db.transaction(() => seed.forEach((r) => insert.run(r.id, r.tenantId, r.name, r.price)))()
    const select = db.prepare(`SELECT * FROM raw_items WHERE id = ?`)
    const readers: Record<string, () => Promise<number>> = {
      "memory Store.get": await storeReader(memoryTier),
      "SQLite Store.get": await storeReader(sqlite(path.join(dir, "fw.db"))),
      "raw better-sqlite3 get": async () => {
        const start = performance.now()
        for (let i = 0; i < batch; i++) select.get(idOf(i))
        return performance.now() - start
      }
    }
    const totals: Record<string, number> = Object.fromEntries(Object.keys(readers).map((name) => [name, 0]))
    for (const reader of Object.values(readers)) for (let i = 0; i < 3; i++) await reader()
    for (let round = 0; round < rounds; round++) {
      for (const [name, reader] of Object.entries(readers)) totals[name]! += await reader()
    }
    db.close()
    const raw = totals["raw better-sqlite3 get"]!
    const n = rounds * batch
    console.log(`\npoint reads, alternating batches of ${batch} (${n} reads each)`)
    console.table(Object.entries(totals).map(([name, ms]) => ({
      read: name,
      "reads/s": Math.round(n / (ms / 1000)).toLocaleString("en-US"),
      "µs/read": Number((ms * 1000 / n).toFixed(2)),
      "vs raw better-sqlite3": Number((raw / ms).toFixed(2))
    })))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
