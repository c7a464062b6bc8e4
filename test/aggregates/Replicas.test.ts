/**
 * Two replicas as real processes (`fw serve` twice on one PostgreSQL database): each scheduled
 * trigger of an aggregate is refreshed by one of them, not by both (spec 3.7, the slot claim in
 * `_fw_aggregate_meta`). The in-process variant with the TestClock is in Refresh.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { createServer } from "node:net"
import * as path from "node:path"
import { promisify } from "node:util"
import pg from "pg"
import * as Pg from "../support/Pg.js"

const bin = path.resolve("bin/fw.js")
const entry = path.resolve("test/aggregates/fixtures/replica-app/main.ts")
const slotMs = 2_000

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")))
    })
  })

/** Starts `fw serve` as replica `name`; resolves once it answers `/_fw/health`. */
const startReplica = async (name: string, url: string, children: Array<ChildProcess>) => {
  const port = await freePort()
  let output = ""
  const child = spawn(process.execPath, [bin, "serve", entry], {
    env: { ...process.env, FW_TEST_REPLICA_PG: url, FW_REPLICA: name, PORT: String(port), FW_INSPECT_TOKEN: "replicas" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  child.stdout!.on("data", (chunk) => output += String(chunk))
  child.stderr!.on("data", (chunk) => output += String(chunk))
  await new Promise<void>((resolve, reject) => {
    let done = false
    child.once("exit", (code) => done || reject(new Error(`replica ${name} exited (${code}) before serving:\n${output}`)))
    // Each try gives up after 500 ms: the server listens before its routes are attached, and a
    // request that arrives in between is never answered (without a timeout, fetch waits for
    // undici's 300 s headers timeout: the ~325 s this case once took).
    const poll = () =>
      done ? undefined : fetch(`http://127.0.0.1:${port}/_fw/health`, { signal: AbortSignal.timeout(500) }).then(
        (response) => response.ok ? (done = true, resolve()) : setTimeout(poll, 100),
        () => setTimeout(poll, 100)
      )
    poll()
  })
}

type Build = { readonly replica: string; readonly at: number }

const builds = async (url: string): Promise<ReadonlyArray<Build>> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const result = await client.query<{ replica: string; at: string | number }>(`SELECT replica, at FROM builds ORDER BY at`)
    return result.rows.map((row) => ({ replica: row.replica, at: Number(row.at) }))
  } finally {
    await client.end()
  }
}

if (Pg.serverUrl === null) console.log(Pg.skipReason)

describe.skipIf(Pg.serverUrl === null)("aggregate refresh: two replica processes on one PostgreSQL", () => {
  it.scoped("each scheduled trigger is refreshed by one replica only", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const children: Array<ChildProcess> = []
      yield* Effect.addFinalizer(() => Effect.sync(() => children.forEach((child) => child.kill("SIGTERM"))))
      // Interruptible, so a timeout still reaches the finalizer that stops the replicas.
      yield* Effect.tryPromise(async () => {
        // The schema first (two processes creating the same tables at once would race in the catalog).
        await promisify(execFile)(process.execPath, [bin, "db", "apply", entry], { env: { ...process.env, FW_TEST_REPLICA_PG: url } })
        await Promise.all([startReplica("one", url, children), startReplica("two", url, children)])
        // Until both have booted (one boot build each) and six slots have passed since.
        const deadline = Date.now() + 120_000
        for (;;) {
          const all = await builds(url)
          const bootOfTwo = all.find((b) => b.replica === "two")
          if (bootOfTwo !== undefined && all.filter((b) => b.at >= bootOfTwo.at + slotMs).length >= 6) break
          if (Date.now() > deadline) throw new Error(`not enough builds within two minutes: ${JSON.stringify(all)}`)
          await new Promise((resolve) => setTimeout(resolve, 500))
        }
      }).pipe(Effect.orDie)
      for (const child of children) child.kill("SIGTERM")
      const all = yield* Effect.promise(() => builds(url))
      // Each replica's first build is its boot refresh (not claimed: every replica's own); the rest
      // are scheduled triggers.
      const boots = new Set(["one", "two"].map((replica) => all.find((b) => b.replica === replica)))
      const scheduled = all.filter((b) => !boots.has(b))
      // A build runs at or after its slot's start, late under load (even into the next slot), so
      // builds are not bucketed by time: the slots from the first scheduled build's to the last's
      // bound their count (with two slots of slack for a late first build). Triggers run by both
      // replicas would double it: six builds in three slots.
      const first = Math.floor(scheduled[0]!.at / slotMs)
      const last = Math.floor(scheduled[scheduled.length - 1]!.at / slotMs)
      assert.isAtLeast(scheduled.length, 6)
      assert.isAtMost(scheduled.length, last - first + 2, `${scheduled.length} scheduled builds over slots ${first}..${last}: ${JSON.stringify(scheduled)}`)
    }), 180_000)
})
