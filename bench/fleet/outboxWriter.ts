/**
 * The receive benchmark's writer (a process of its own, so its CPU is not the receiver's): inserts
 * outbox rows as a replica would (one transaction each, one change each, `history`-style payload),
 * paced, and announces them after commit the way the fleet tap does (coalesced: one `pg_notify` in
 * flight, one more if anything committed meanwhile). Reads `go <prefix> <count> <rate>` lines on
 * stdin and prints `DONE <prefix>` when that many have committed.
 */
import pg from "pg"
import { createInterface } from "node:readline"

const url = process.env.DATABASE_URL!
const origin = "bench-writer"
const pool = new pg.Pool({ connectionString: url, max: 16 }).on("error", () => undefined)
await Promise.all(Array.from({ length: 16 }, () => pool.query("SELECT 1")))

let announcing = false
let again = false
const announce = async (): Promise<void> => {
  if (announcing) return void (again = true)
  announcing = true
  do {
    again = false
    await pool.query(`SELECT pg_notify('fw_changes', $1)`, [origin])
  } while (again)
  announcing = false
}

const write = async (id: string) => {
  const client = await pool.connect()
  try {
    const at = Date.now()
    const change = {
      table: "docs", op: "insert", id, tenantId: null, before: null, after: { id, title: `t ${id}` }, at,
      provenance: { traceId: "0".repeat(32), subjectId: "bench", procedure: "docs.create" }, ref: `${id}:1`
    }
    await client.query("BEGIN")
    await client.query(`INSERT INTO _fw_change_outbox (origin, changes) VALUES ($1, $2)`, [origin, JSON.stringify([change])])
    await client.query("COMMIT")
  } finally {
    client.release()
  }
  void announce()
}

const run = async (prefix: string, count: number, rate: number) => {
  const started = performance.now()
  const pending: Array<Promise<void>> = []
  for (let i = 0; i < count; i++) {
    const due = started + (i * 1000) / rate - performance.now()
    if (due > 0) await new Promise((resolve) => setTimeout(resolve, due))
    pending.push(write(`${prefix}-${i}`))
  }
  await Promise.all(pending)
  console.log(`DONE ${prefix}`)
}

console.log("READY")
for await (const line of createInterface({ input: process.stdin })) {
  const [command, prefix, count, rate] = line.split(" ")
  if (command === "go") await run(prefix!, Number(count), Number(rate))
}
await pool.end()
