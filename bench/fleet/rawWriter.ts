/**
 * One process of the fleet benchmark's raw `pg` peer: a pool of 16 inserting its share of the rows
 * (every third, from `FW_RAW_FIRST`) with 16 in flight. Prints `READY` once warmed up (its share
 * of `FW_BENCH_WARM` rows inserted first, as each fleet is warmed up); then for each line `go
 * <prefix>` on stdin inserts its share of `FW_BENCH_WRITES` rows named `<prefix>-i` and prints
 * `DONE <cpu ms>` (its own CPU time while inserting); on `rest` (sent once the bench has read
 * their backends' CPU) closes its connections, opened again by the next `go`: the PostgreSQL server
 * the benchmark shares allows 100 connections, and the peers' pools would otherwise hold theirs
 * beside the others' for ten seconds after each run; on `end` closes them and exits.
 */
import pg from "pg"
import { createInterface } from "node:readline"

const url = process.env.DATABASE_URL!
const first = Number(process.env.FW_RAW_FIRST ?? 0)
const writes = Number(process.env.FW_BENCH_WRITES ?? 3_000)
const warm = Number(process.env.FW_BENCH_WARM ?? 0)
const inFlight = 16

const makePool = () => new pg.Pool({ connectionString: url, max: inFlight }).on("error", () => undefined)
let pool = makePool()
/** Inserts every third of `count` rows named `${prefix}-i`, from `first`, 16 in flight. */
const insert = (prefix: string, count: number) => {
  let next = first
  return Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < count) {
      const i = next
      next += 3
      await pool.query(`INSERT INTO docs (id, title) VALUES ($1, $2)`, [`${prefix}-${i}`, `t${i}`])
    }
  }))
}
// Warmed up as the fleets are (V8's optimised code, the pool's connections): the same steady state.
await insert("warm", warm)
console.log("READY")
const lines = createInterface({ input: process.stdin })
for await (const line of lines) {
  const [command, prefix = "w"] = line.trim().split(" ")
  if (command === "rest") {
    await pool.end()
    pool = makePool()
    continue
  }
  if (command !== "go") break
  const before = process.cpuUsage()
  await insert(prefix, writes)
  const used = process.cpuUsage(before)
  console.log(`DONE ${(used.user + used.system) / 1000}`)
}
await pool.end()
lines.close()
