/**
 * Terminating a PostgreSQL backend so that its client has not yet seen it: the server's FATAL (and
 * the closed socket) wait unread until after the next statement is sent on that connection, which
 * then meets the FATAL. Without it, whether node-postgres read the FATAL first (and reported the
 * connection failed) would be a race.
 */
import { execFileSync } from "node:child_process"
import { Effect } from "effect"

/** Run in another process: terminates backend `pid` and returns once it has exited (its FATAL sent). */
const terminator = `
const pg = require("pg")
const [url, pid] = process.argv.slice(1)
const run = async () => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query("SELECT pg_terminate_backend($1)", [pid])
  while ((await client.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])).rowCount > 0) {
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  await client.end()
}
run().catch((error) => { console.error(error); process.exit(1) })
`

/**
 * Terminates backend `pid` of the database at `url` while this process is blocked (no event-loop
 * turn until the backend has exited); the statement sent right after it, in the same turn, meets
 * the FATAL.
 */
export const terminateUnseen = (url: string, pid: number): Effect.Effect<void> =>
  Effect.zipRight(
    // A fresh turn first, so that the statement after this one runs before the fiber yields again.
    Effect.yieldNow(),
    Effect.sync(() => {
      execFileSync(process.execPath, ["-e", terminator, url, String(pid)], { stdio: ["ignore", "ignore", "inherit"] })
    })
  )
