/**
 * One process of the fleet benchmark's raw `pg` peer: a pool of 16 inserting its share of the rows
 * (every third, from `FW_RAW_FIRST`) with 16 in flight. Prints `READY` once its connections are
 * open, starts on a line on stdin, and prints `DONE <cpu ms>` (its own CPU time while inserting);
 * closes its connections on the next line (the bench reads their backends' CPU before).
 */
import pg from "pg"
import { createInterface } from "node:readline"

const url = process.env.DATABASE_URL!
const first = Number(process.env.FW_RAW_FIRST ?? 0)
const writes = Number(process.env.FW_BENCH_WRITES ?? 3_000)
const inFlight = 16

const pool = new pg.Pool({ connectionString: url, max: inFlight }).on("error", () => undefined)
await Promise.all(Array.from({ length: inFlight }, () => pool.query("SELECT 1")))
console.log("READY")
const lines = createInterface({ input: process.stdin })
const nextLine = () => new Promise<void>((resolve) => lines.once("line", () => resolve()))
await nextLine()
const before = process.cpuUsage()
let next = first
await Promise.all(Array.from({ length: inFlight }, async () => {
  while (next < writes) {
    const i = next
    next += 3
    await pool.query(`INSERT INTO docs (id, title) VALUES ($1, $2)`, [`w-${i}`, `t${i}`])
  }
}))
const used = process.cpuUsage(before)
console.log(`DONE ${(used.user + used.system) / 1000}`)
await nextLine()
await pool.end()
lines.close()
