/**
 * Fleet receive benchmark: what a replica spends per change another replica committed — the
 * NOTIFY, the outbox page read, the delivery to its listeners — measured alone, in this process
 * (`process.cpuUsage`), while a writer process inserts outbox rows and announces them as a replica
 * does. The peer, in the same run and interleaved (fw, raw, fw, raw): a bare `pg` receiver that
 * LISTENs and, per notification, reads the rows from a little below the last id it saw and
 * JSON-parses the new ones (no snapshot tracking, no listeners: the floor of any outbox reader).
 * The fw receiver has the listeners an app has: one recording every event (the fleet harness's),
 * one with nothing to do for remote changes (row history's), and an `events` queue (live queries).
 * `FW_BENCH_WRITES` (default 3,000) per phase, `FW_BENCH_RATE` (default 1,000) rows per second.
 * Prints CPU per delivered change (of this process, and of the receiver's PostgreSQL backends: its
 * reads' server time, from `/proc` of the backends of its connections, when the server runs on this
 * machine) and delivery latency (write → listener) p50 / p99.
 * `FW_BENCH_ROUNDS` (default 2) sets the interleaved rounds; `FW_BENCH_ONLY=fw` runs only the fw
 * receiver (to profile it alone: `node --cpu-prof --import tsx bench/fleet/receive.ts`).
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Queue, Redacted } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import pg from "pg"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import { cpuOf, ownCpu, table } from "../support.js"

const pgUrl = process.env.FW_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const WRITES = Number(process.env.FW_BENCH_WRITES ?? 3_000)
const RATE = Number(process.env.FW_BENCH_RATE ?? 1_000)
const ROUNDS = Number(process.env.FW_BENCH_ROUNDS ?? 2)
const ONLY_FW = process.env.FW_BENCH_ONLY === "fw"


/** The receiver's connections are named this (`application_name`): their backends' CPU is its server time. */
const receiverName = "fw_rx_bench"

/** CPU milliseconds each server backend of the receiver's connections has used so far, by pid. */
const serverCpu = async (url: string) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, [receiverName])
    return new Map(rows.map((row) => [row.pid, cpuOf(row.pid)] as const))
  } finally {
    await client.end()
  }
}

/** Server CPU used from `before` to `after` (a backend that started in between: all of its own). */
const serverSpent = (before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>) =>
  [...after].reduce((sum, [pid, cpu]) => sum + cpu - (before.get(pid) ?? 0), 0)

const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN

/**
 * A promise and its resolve (Node 20 has no `Promise.withResolvers`). Resolved anyway, with a
 * warning, when a phase's changes have not all arrived 30 s after it was due to end: the raw peer's
 * id window misses a row that committed more than its window behind (a heavily loaded box), and a
 * run must not hang on it (its figures then count the changes that did arrive).
 */
const resolvers = (what: string) => {
  let resolve!: () => void
  const promise = new Promise<void>((done) => void (resolve = done))
  const timer = setTimeout(() => {
    console.error(`${what}: not every change arrived; the phase ends without them`)
    resolve()
  }, (WRITES / RATE) * 1000 + 30_000)
  return { promise: promise.finally(() => clearTimeout(timer)), resolve }
}

const admin = async (sql: string) => {
  const client = new pg.Client({ connectionString: pgUrl })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

/** The writer process: `go` sends a phase, resolved when it printed `DONE`. */
const startWriter = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly go: (prefix: string) => Promise<void>; readonly kill: () => void }>((resolve, reject) => {
        const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "outboxWriter.ts")], {
          env: { ...process.env, DATABASE_URL: url },
          stdio: ["pipe", "pipe", "inherit"]
        })
        let out = ""
        const waiting = new Map<string, () => void>()
        child.stdout!.on("data", (chunk: Buffer) => {
          out += chunk.toString()
          for (const [prefix, done] of waiting) {
            if (out.includes(`DONE ${prefix}\n`)) {
              waiting.delete(prefix)
              done()
            }
          }
          if (out.includes("READY")) {
            resolve({
              go: (prefix) =>
                new Promise<void>((done) => {
                  waiting.set(prefix, done)
                  child.stdin!.write(`go ${prefix} ${WRITES} ${RATE}\n`)
                }),
              kill: () => void child.kill("SIGKILL")
            })
          }
        })
        child.on("exit", (code) => reject(new Error(`writer exited (${code}): ${out}`)))
      })
    ),
    (writer) => Effect.sync(writer.kill)
  )

interface Phase {
  readonly cpu: number
  /** The receiver's server backends' CPU per change. */
  readonly server: number
  readonly latency: Array<number>
}

/** The fw receiver: a fleet tap with an app's listeners, for one phase. */
const fwPhase = (url: string, go: (prefix: string) => Promise<void>, prefix: string) =>
  Effect.scoped(Effect.gen(function*() {
    const tap = yield* Layer.build(ChangeTap.layerFleet({ pollMs: 60_000, listenCheckMs: 60_000 }).pipe(
      Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 4, applicationName: receiverName }))
    ))
    const changes = tap.unsafeMap.get(ChangeTap.ChangeTap.key) as ChangeTap.ChangeTapShape
    const latency: Array<number> = []
    let seen = 0
    const all = resolvers(prefix)
    yield* changes.subscribe({
      name: "recorder",
      onEvent: (event) =>
        Effect.sync(() => {
          if (!event.id.startsWith(prefix)) return
          latency.push(Date.now() - event.at)
          if (++seen === WRITES) all.resolve()
        })
    })
    yield* changes.subscribe({ name: "idle", onEvent: (event) => event.remote === true ? Effect.void : Effect.log(event.id) })
    const events = yield* changes.events
    yield* Queue.take(events).pipe(Effect.forever, Effect.forkScoped)
    const serverBefore = yield* Effect.promise(() => serverCpu(url))
    const before = ownCpu()
    yield* Effect.promise(() => Promise.all([go(prefix), all.promise]))
    const cpu = (ownCpu() - before) / Math.max(1, seen)
    const server = serverSpent(serverBefore, yield* Effect.promise(() => serverCpu(url))) / Math.max(1, seen)
    return { cpu, server, latency } satisfies Phase
  }))

/** The raw receiver: LISTEN, and per notification the rows after the last id read. */
const rawPhase = (url: string, go: (prefix: string) => Promise<void>, prefix: string) =>
  Effect.promise(async (): Promise<Phase> => {
    const listen = new pg.Client({ connectionString: url, application_name: receiverName })
    const reader = new pg.Client({ connectionString: url, application_name: receiverName })
    await Promise.all([listen.connect(), reader.connect()])
    const { rows: [top] } = await reader.query<{ id: string }>(`SELECT coalesce(max(id), 0)::text AS id FROM _fw_change_outbox`)
    let last = top!.id
    const latency: Array<number> = []
    let seen = 0
    const all = resolvers(prefix)
    // Ids are taken at insert, not at commit: a window below the last id read catches the rows of
    // transactions that committed late (the writer has at most 16 in flight), deduplicated by id.
    const window = 64
    const read = new Set<string>()
    let reading = false
    let again = false
    const readNew = async () => {
      if (reading) return void (again = true)
      reading = true
      do {
        again = false
        const { rows } = await reader.query<{ id: string; changes: Array<{ id: string; at: number }> }>(
          `SELECT id::text AS id, changes FROM _fw_change_outbox WHERE id > $1 ORDER BY id LIMIT 500`,
          [String(Math.max(0, Number(last) - window))]
        )
        for (const row of rows) {
          if (Number(row.id) > Number(last)) last = row.id
          if (read.has(row.id)) continue
          read.add(row.id)
          for (const change of row.changes) {
            if (!change.id.startsWith(prefix)) continue
            latency.push(Date.now() - change.at)
            if (++seen === WRITES) all.resolve()
          }
        }
      } while (again)
      reading = false
    }
    listen.on("notification", () => void readNew())
    await listen.query("LISTEN fw_changes")
    const serverBefore = await serverCpu(url)
    const before = ownCpu()
    await Promise.all([go(prefix), all.promise])
    const cpu = (ownCpu() - before) / Math.max(1, seen)
    const server = serverSpent(serverBefore, await serverCpu(url)) / Math.max(1, seen)
    listen.removeAllListeners("notification")
    while (reading) await new Promise((resolve) => setTimeout(resolve, 5))
    await Promise.all([listen.end(), reader.end()])
    return { cpu, server, latency }
  })

/** Runs the receive benchmark and prints its table. */
export const main = Effect.scoped(Effect.gen(function*() {
  const name = `fw_bench_rx_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`
  yield* Effect.acquireRelease(
    Effect.promise(() => admin(`CREATE DATABASE ${name}`)),
    () => Effect.promise(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  )
  const url = new URL(pgUrl)
  url.pathname = `/${name}`
  // The first fw phase creates the outbox; a warm-up phase of each first.
  const writer = yield* startWriter(url.toString())
  yield* fwPhase(url.toString(), writer.go, "warm-fw")
  if (!ONLY_FW) yield* rawPhase(url.toString(), writer.go, "warm-raw")
  const fw: Array<Phase> = []
  const raw: Array<Phase> = []
  for (let round = 0; round < ROUNDS; round++) {
    fw.push(yield* fwPhase(url.toString(), writer.go, `fw${round}`))
    if (!ONLY_FW) raw.push(yield* rawPhase(url.toString(), writer.go, `raw${round}`))
  }
  const summary = (phases: ReadonlyArray<Phase>) => {
    const latency = phases.flatMap((phase) => phase.latency).sort((a, b) => a - b)
    const cpu = phases.reduce((sum, phase) => sum + phase.cpu, 0) / phases.length
    const server = phases.reduce((sum, phase) => sum + phase.server, 0) / phases.length
    return { cpu, server, p50: percentile(latency, 0.5), p99: percentile(latency, 0.99) }
  }
  const f = summary(fw)
  const r = summary(raw)
  table(`fleet receive: ${WRITES} changes per phase at ${RATE}/s from a writer process, ${ROUNDS} rounds interleaved`, [
    { receiver: "raw pg (LISTEN + id window read)", "CPU per change": `${r.cpu.toFixed(3)} ms`, "server CPU per change": `${r.server.toFixed(3)} ms`, "write → delivered p50 / p99": `${r.p50} / ${r.p99} ms`, "CPU vs raw": "1.00×" },
    { receiver: "fw fleet tap (3 listeners)", "CPU per change": `${f.cpu.toFixed(3)} ms`, "server CPU per change": `${f.server.toFixed(3)} ms`, "write → delivered p50 / p99": `${f.p50} / ${f.p99} ms`, "CPU vs raw": `${(f.cpu / r.cpu).toFixed(2)}×` }
  ])
}))

/** Entry used by `bench/index.ts`. */
export const run = () => Effect.runPromise(main)

if (process.argv[1]?.endsWith("receive.ts")) await run()
