/**
 * Fleet benchmark (issues 16 and 24): three replicas of the harness app as real processes on one
 * PostgreSQL.
 * - committed writes per second through `POST /rpc` with 48 in flight across the three, row history
 *   on and off, against two peers in the same run: what a user would write instead, a Fastify app
 *   of three processes inserting the same rows over `pg` and NOTIFYing each, every process
 *   LISTENing (`fastifyPeer.ts`, driven by the same load generator with the same rpc request; its
 *   NOTIFY after the insert's commit, or with `FW_BENCH_PEER_NOTIFY=inside` in the insert's
 *   transaction), and raw `pg` inserts of the same rows with 48 in flight from three processes (a
 *   pool of 16 each): `FW_BENCH_ROUNDS` rounds (default 3) of the four, each warmed up once and kept
 *   running, each first in its round in turn; the ratios are the medians of the rounds' (the shared
 *   machine's speed drifts by a fifth or more within a minute, and peers measured a minute apart,
 *   each once, gave ratios scattered over ±0.04);
 * - write → change event latency on the writing replica and on the others (p50, p99), and the call
 *   round trip, at paced rates (`FW_BENCH_RATES`, default 250,500,1000 commits per second) where
 *   the box is not saturated: the figure then shows the framework's latency, not the queueing of
 *   an overloaded machine (the achieved rate is printed next to each; at the saturated rate the
 *   latency is mostly queueing);
 * - CPU time per write: of the replicas together (round robin), and per role (writes sent to one
 *   replica only, at `FW_BENCH_ROLE_RATE`, default 150/s: its CPU per write is the writing role,
 *   the other two's is the receiving role), of the load generator, and of the raw `pg` processes.
 *   On a shared machine throughput follows the CPU share a process gets: these say where the time
 *   goes whatever else runs.
 * The load generator posts the rpc message's JSON over keep-alive connections (`rpcPoster`: the
 * typed rpc client cost ~2 ms of CPU per call, as much as a third of a replica's, on the same two
 * cores; undici's `dispatch` 0.058–0.065 ms against 0.035–0.05 on raw sockets).
 * `FW_BENCH_WRITES` sets the writes per run (default 2,000), `FW_BENCH_WARM` the writes that warm each
 * fleet, and each peer, up first (default 20,000: with 4,000 the replicas still used 0.46 ms of
 * CPU per write where they settle at 0.24, and the raw peer ran 9,700 inserts/s against 17,500); `FW_BENCH_ONLY=paced` runs only the
 * paced and role runs (history on), `FW_BENCH_ONLY=rounds` only the saturated rounds of the four,
 * `FW_BENCH_ONLY=saturated` only the saturated run with history on
 * (with `FW_BENCH_PROF`: a profile of saturation alone); `FW_BENCH_PROF=<dir>` runs the replicas and the Fastify peer's processes under `--cpu-prof`
 * (profiles written to `<dir>` when they exit; summarise with `bench/profileSummary.ts`), sampled every
 * `FW_BENCH_PROF_INTERVAL` microseconds (default 1000); `FW_BENCH_NODE_ARGS` adds options to the
 * replicas' `node` (space-separated, e.g. `--log-deopt --logfile=/tmp/v8-%p.log`); `FW_COALESCE_MS`
 * sets their fleet tap's coalescing window. `FW_BENCH_TRACE=1` prints, after each run,
 * where the other replicas' write → event time went, per change (see `breakdown`), and each
 * replica's event-loop delay.
 */
import { Effect, Redacted } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { createInterface } from "node:readline"
import pg from "pg"
import { RowHistory } from "../../src/history/index.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import { PgClient } from "@effect/sql-pg"
import { Docs } from "../../test/fleet/app.js"
import * as Fleet from "../../test/fleet/support.js"
import { cpuOf, nodeArgsFrom, ownCpu, perSecond, rpcPoster, serverCpu, serverCpuSince, table } from "../support.js"

const pgUrl = process.env.FW_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const WRITES = Number(process.env.FW_BENCH_WRITES ?? 2_000)
const RATES = (process.env.FW_BENCH_RATES ?? "250,500,1000").split(",").map(Number).filter((rate) => rate > 0)
const ROLE_RATE = Number(process.env.FW_BENCH_ROLE_RATE ?? 150)
const ONLY_PACED = process.env.FW_BENCH_ONLY === "paced"
const ONLY_SATURATED = process.env.FW_BENCH_ONLY === "saturated"
const ONLY_ROUNDS = process.env.FW_BENCH_ONLY === "rounds"
const PROF = process.env.FW_BENCH_PROF
const NODE_ARGS = nodeArgsFrom("FW_BENCH_NODE_ARGS")
const TRACE = process.env.FW_BENCH_TRACE === "1"
const IN_FLIGHT = 48
const WARM = Number(process.env.FW_BENCH_WARM ?? 20_000)
const ROUNDS = Math.max(1, Number(process.env.FW_BENCH_ROUNDS ?? 3))
const PEER_NOTIFY = process.env.FW_BENCH_PEER_NOTIFY === "inside" ? "inside" : "after"

/**
 * Three serving processes and their database (the server's CPU is counted for its backends only):
 * fw replicas, or the Fastify peer's processes, which answer the same routes.
 */
interface Replicas {
  readonly replicas: ReadonlyArray<Pick<Fleet.Replica, "url" | "child">>
  readonly database: string
  /** fw replicas, which show their fleet tap's work on `GET /_trace` (`FW_BENCH_TRACE`). */
  readonly fw: boolean
}

const freshDb = async () => {
  const name = `fw_bench_f_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`
  const admin = new pg.Client({ connectionString: pgUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(pgUrl)
  url.pathname = `/${name}`
  return { url: url.toString(), drop: async () => {
    const a = new pg.Client({ connectionString: pgUrl })
    await a.connect()
    await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await a.end()
  } }
}


/** The median of `values` (the mean of the middle two when they are even in number). */
const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const half = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[half]! : (sorted[half - 1]! + sorted[half]!) / 2
}

const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN

const postJson = rpcPoster(IN_FLIGHT)

/** One rpc call over `POST /rpc` as raw JSON; resolves with whether it answered success. */
const post = (url: string, tag: string, payload: unknown, id: number) =>
  postJson(url, JSON.stringify({ _tag: "Request", id: String(id), tag, payload, headers: [] }))

/** The statements a replica has sent to PostgreSQL so far, by name or text (`GET /_queries`). */
const queriesOf = (replica: Replicas["replicas"][number]) =>
  Effect.promise(async () => (await (await fetch(`${replica.url}/_queries`)).json()) as Record<string, number>)

/** Per write: the statements each replica sent during a run (the difference of two `queriesOf`). */
const perWrite = (before: Record<string, number>, after: Record<string, number>, writes: number) =>
  Object.fromEntries(Object.entries(after).map(([key, n]) => [key, (n - (before[key] ?? 0)) / writes] as const).filter(([, n]) => n > 0))

/** A change event as a replica's harness listener recorded it (`GET /_events`). */
interface Received {
  readonly id: string
  readonly remote: boolean
  readonly at: number
  readonly receivedAt: number
}

/** A replica's fleet tap work as its driver saw it (`GET /_trace`, `FW_TRACE_DELIVERY=1`). */
interface Trace {
  readonly reads: ReadonlyArray<readonly [number, number]>
  readonly heard: ReadonlyArray<readonly [number, string]>
  readonly origin: string | null
  readonly loopDelay: { readonly p50: number; readonly p99: number; readonly max: number }
}

/**
 * Per change received from another replica, where its write → event time went (all in ms, by the
 * one wall clock the processes share): `commit`, from the change's `at` to its delivery on the
 * writing replica (the write's commit); `announce`, from there to the first announcement of the
 * writer heard by the receiver (the writer's coalescing window, the NOTIFY's way through
 * PostgreSQL); `toRead`, from there to the start of the outbox page read that delivered it (the
 * reader's window, a read under way; negative when a read started earlier already saw the
 * commit); `read`, that read's round trip; `deliver`, from its answer to the harness listener.
 * Printed as p50 / p90 / p99 of each, and the means of each over the slowest 1% of changes.
 */
const breakdown = (replicas: Replicas["replicas"], prefix: string, received: ReadonlyArray<ReadonlyArray<Received>>) =>
  Effect.gen(function*() {
    const traces = yield* Effect.promise(() => Promise.all(replicas.map(async (replica) => (await (await fetch(`${replica.url}/_trace`)).json()) as Trace)))
    const writer = new Map<string, { readonly committed: number; readonly origin: string | null }>()
    received.forEach((events, i) => {
      for (const event of events) if (!event.remote) writer.set(event.id, { committed: event.receivedAt, origin: traces[i]!.origin })
    })
    const keys = ["commit", "announce", "toRead", "read", "deliver", "total"] as const
    const rows: Array<Record<(typeof keys)[number], number>> = []
    received.forEach((events, i) => {
      const { heard, reads } = traces[i]!
      for (const event of events) {
        const wrote = writer.get(event.id)
        if (!event.remote || wrote === undefined) continue
        // Reads run one after another: the one that delivered the change is the last to answer before it arrived.
        let lo = 0
        let hi = reads.length - 1
        while (lo < hi) {
          const mid = Math.ceil((lo + hi) / 2)
          if (reads[mid]![1] <= event.receivedAt) lo = mid
          else hi = mid - 1
        }
        const read = reads[lo]
        const announced = heard.find(([at, payload]) => at >= wrote.committed && payload === wrote.origin)?.[0]
        if (read === undefined || announced === undefined) continue
        rows.push({
          commit: wrote.committed - event.at,
          announce: announced - wrote.committed,
          toRead: read[0] - announced,
          read: read[1] - read[0],
          deliver: event.receivedAt - read[1],
          total: event.receivedAt - event.at
        })
      }
    })
    if (rows.length === 0) return
    const sorted = (key: (typeof keys)[number]) => rows.map((row) => row[key]).sort((a, b) => a - b)
    rows.sort((a, b) => a.total - b.total)
    const slowest = rows.slice(Math.floor(rows.length * 0.99))
    const mean = (key: (typeof keys)[number]) => (slowest.reduce((sum, row) => sum + row[key], 0) / slowest.length).toFixed(1)
    console.log(`[${prefix}] other replicas, ${rows.length} changes, p50/p90/p99 ms: ${keys.map((key) => { const list = sorted(key); return `${key} ${percentile(list, 0.5)}/${percentile(list, 0.9)}/${percentile(list, 0.99)}` }).join("; ")}`)
    console.log(`[${prefix}] slowest 1%, means ms: ${keys.map((key) => `${key} ${mean(key)}`).join("; ")}`)
    console.log(`[${prefix}] event loop delay p50/p99/max ms by replica: ${traces.map((trace) => `${trace.loopDelay.p50}/${trace.loopDelay.p99}/${trace.loopDelay.max}`).join("; ")}`)
  })

/** Latency figures of one run. */
interface Run {
  readonly perSecond: number
  readonly local: Array<number>
  readonly remote: Array<number>
  /**
   * Commit on the writing replica → event on another: each remote event's arrival less the moment
   * the writer delivered the same change to itself, which it does as soon as it learns of the
   * commit (issue 16's figure; "write → event" also counts the statement and its commit).
   */
  readonly commitToRemote: Array<number>
  readonly call: Array<number>
  readonly replicaCpu: ReadonlyArray<number>
  readonly clientCpu: number
  /** The PostgreSQL server's CPU per write during the run (all its processes). */
  readonly serverCpu: number
  readonly failed: number
  /** Statements per write sent by each replica, by name or text. */
  readonly statements: ReadonlyArray<Record<string, number>>
}

/**
 * `writes` creates of `${prefix}-i` over the replicas that `target` picks, at most `IN_FLIGHT` at
 * once, each sent at its due time when `rate` is given (a write is late only when `IN_FLIGHT` are
 * still unanswered). Returns when every replica received every change.
 */
const drive = ({ database, fw, replicas }: Replicas, prefix: string, writes: number, rate: number | undefined, target: (i: number) => number) =>
  Effect.gen(function*() {
    const queriesBefore = yield* Effect.all(replicas.map(queriesOf))
    const replicasBefore = replicas.map((replica) => cpuOf(replica.child.pid!))
    const clientBefore = ownCpu()
    const serverBefore = yield* Effect.promise(() => serverCpu(database))
    const call: Array<number> = []
    let failed = 0
    let transportErrors = 0
    const started = performance.now()
    yield* Effect.promise(() =>
      new Promise<void>((resolve, reject) => {
        let next = 0
        let inFlight = 0
        let timer: ReturnType<typeof setTimeout> | undefined
        const due = (i: number) => rate === undefined ? 0 : started + (i * 1000) / rate
        const pump = () => {
          timer = undefined
          while (next < writes && inFlight < IN_FLIGHT && due(next) <= performance.now()) {
            const i = next++
            inFlight++
            const sent = performance.now()
            const attempt = (left: number): Promise<boolean> =>
              post(`${replicas[target(i)]!.url}/rpc`, "docs.create", { id: `${prefix}-${i}`, title: `t${i}` }, i).catch((error: unknown) => {
                // A kept-alive socket the server closed as it was reused: sent again, and counted.
                transportErrors++
                if (left === 0) throw error
                return attempt(left - 1)
              })
            attempt(3).then((ok) => {
              call.push(performance.now() - sent)
              if (!ok) failed++
              inFlight--
              if (next >= writes && inFlight === 0) resolve()
              else pump()
            }, reject)
          }
          if (next < writes && inFlight < IN_FLIGHT && timer === undefined) {
            timer = setTimeout(pump, Math.max(0, due(next) - performance.now()))
          }
        }
        pump()
      })
    )
    const seconds = (performance.now() - started) / 1000
    const replicaCpu = replicas.map((replica, i) => (cpuOf(replica.child.pid!) - replicasBefore[i]!) / writes)
    const clientCpu = (ownCpu() - clientBefore) / writes
    const serverAfter = yield* Effect.promise(() => serverCpu(database))
    const local: Array<number> = []
    const remote: Array<number> = []
    const received: Array<ReadonlyArray<Received>> = []
    for (const replica of replicas) {
      const events = yield* Fleet.eventually(Effect.promise(async () => {
        const response = await fetch(`${replica.url}/_events`)
        const all = (await response.json()) as Array<Received>
        return all.filter((event) => event.id.startsWith(`${prefix}-`))
      }), (e) => e.length >= writes - failed)
      for (const event of events) (event.remote ? remote : local).push(event.receivedAt - event.at)
      received.push(events)
    }
    if (TRACE && fw) yield* breakdown(replicas, prefix, received)
    const committed = new Map<string, number>()
    for (const events of received) for (const event of events) if (!event.remote) committed.set(event.id, event.receivedAt)
    const commitToRemote: Array<number> = []
    for (const events of received) {
      for (const event of events) {
        const at = event.remote ? committed.get(event.id) : undefined
        if (at !== undefined) commitToRemote.push(event.receivedAt - at)
      }
    }
    // Counted once every replica has every change: the reads that delivered the run's last ones too.
    const queriesAfter = yield* Effect.all(replicas.map(queriesOf))
    const statements = replicas.map((_, i) => perWrite(queriesBefore[i]!, queriesAfter[i]!, writes))
    for (const list of [local, remote, commitToRemote, call]) list.sort((a, b) => a - b)
    if (transportErrors > 0) console.log(`(${prefix}: ${transportErrors} transport errors, sent again)`)
    if (failed > 0) console.log(`(${prefix}: ${failed} writes answered an error)`)
    return {
      perSecond: writes / seconds,
      local,
      remote,
      commitToRemote,
      call,
      replicaCpu,
      clientCpu,
      serverCpu: serverCpuSince(serverBefore, serverAfter) / writes,
      failed,
      statements
    } satisfies Run
  })

/** Options of every served child's `node`: `FW_BENCH_NODE_ARGS`, and `--cpu-prof` under `FW_BENCH_PROF`. */
const childNodeArgs = [
  ...NODE_ARGS,
  ...(PROF === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${PROF}`, `--cpu-prof-interval=${process.env.FW_BENCH_PROF_INTERVAL ?? 1000}`])
]

/**
 * The Fastify peer (`fastifyPeer.ts`): three processes on a fresh database with the same `docs`
 * table, each inserting and NOTIFYing per write and LISTENing, warmed up as the fleets are and
 * driven by the same load generator. `FW_BENCH_PEER_NOTIFY` (`after`, default, or `inside`) says
 * where its NOTIFY goes.
 */
const fastifyPeer = Effect.gen(function*() {
  const db = yield* Effect.acquireRelease(Effect.promise(freshDb), (db) => Effect.promise(db.drop))
  yield* SchemaDiffer.apply([Docs]).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(db.url) })), Effect.orDie)
  const appPath = yield* Effect.promise(() => Fleet.bundleApp("../../bench/fleet/fastifyPeer.ts"))
  const env = { DATABASE_URL: db.url, FW_PEER_NOTIFY: PEER_NOTIFY }
  const replicas = yield* Effect.all([0, 1, 2].map((i) => Fleet.spawnApp(`f${i}`, appPath, env, childNodeArgs)), { concurrency: "unbounded" })
  const warmed: Replicas = { replicas, database: db.url, fw: false }
  yield* drive(warmed, "warm", WARM, undefined, roundRobin)
  yield* rest(warmed)
  return warmed
})

/** The Fastify peer's pools' connections closed between runs (see `fastifyPeer.ts`). */
const rest = ({ replicas }: Replicas) =>
  Effect.promise(() => Promise.all(replicas.map((replica) => fetch(`${replica.url}/_rest`, { method: "POST" }))))

/** Three replicas on a fresh database, history on or off, warmed up. */
const fleet = (history: boolean) =>
  Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(Effect.promise(freshDb), (db) => Effect.promise(db.drop))
    yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(db.url) })), Effect.orDie)
    const env: Record<string, string> = history ? { FW_COUNT_QUERIES: "1" } : { FW_HISTORY: "off", FW_COUNT_QUERIES: "1" }
    if (TRACE) env.FW_TRACE_DELIVERY = "1"
    const replicas = yield* Effect.all([0, 1, 2].map((i) => Fleet.start(`b${i}`, db.url, env, childNodeArgs)), { concurrency: "unbounded" })
    // Warm up every replica's pool, caches and V8's optimised code, as the raw peer is: a served
    // app runs warm, and a short warm-up left much of a run's CPU to the optimising compiler.
    const warmed: Replicas = { replicas, database: db.url, fw: true }
    yield* drive(warmed, "warm", WARM, undefined, (i) => i % 3)
    return warmed
  })

/** A profiled replica writes its profile on a clean exit only: SIGTERM, then wait for it to go. */
const stopForProfile = (replicas: Replicas["replicas"]) =>
  PROF === undefined ? Effect.void : Effect.promise(() =>
    Promise.all(replicas.map((replica) =>
      new Promise<void>((resolve) => {
        replica.child.once("exit", () => resolve())
        replica.child.kill("SIGTERM")
      })
    ))
  )

const roundRobin = (i: number) => i % 3

/** One run of the raw peer: inserts per second, and CPU per insert of its processes and of the server. */
interface RawRun {
  readonly perSecond: number
  readonly cpu: number
  readonly serverCpu: number
}

/**
 * The raw pg peer, warmed up: three processes (a pool of 16 each, 48 in flight) that insert the
 * same rows as the fleet on a database of their own, once per `run(prefix)`.
 */
const rawPeer = Effect.gen(function*() {
  const db = yield* Effect.acquireRelease(Effect.promise(freshDb), (db) => Effect.promise(db.drop))
  yield* SchemaDiffer.apply([Docs]).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(db.url) })), Effect.orDie)
  const writer = path.join(import.meta.dirname, "rawWriter.ts")
  const children = yield* Effect.all([0, 1, 2].map((first) =>
    Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, ["--import", "tsx", writer], {
          env: { ...process.env, DATABASE_URL: db.url, FW_RAW_FIRST: String(first), FW_BENCH_WRITES: String(WRITES), FW_BENCH_WARM: String(WARM) },
          stdio: ["pipe", "pipe", "inherit"]
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
    )
  ))
  // Each child's output lines, handed to whoever waits for the next one.
  const nextLines = children.map((child) => {
    const lines: Array<string> = []
    const waiting: Array<(line: string) => void> = []
    let exited = false
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const next = waiting.shift()
      if (next === undefined) lines.push(line)
      else next(line)
    })
    child.on("exit", () => void (exited = true))
    return () =>
      new Promise<string>((resolve, reject) => {
        const line = lines.shift()
        if (line !== undefined) return resolve(line)
        if (exited) return reject(new Error("raw writer exited"))
        waiting.push(resolve)
      })
  })
  const linesMatching = (pattern: RegExp) =>
    Effect.promise(() =>
      Promise.all(nextLines.map(async (next) => {
        while (true) {
          const match = pattern.exec(await next())
          if (match !== null) return match
        }
      }))
    )
  yield* linesMatching(/^READY/)
  yield* Effect.addFinalizer(() => Effect.sync(() => children.forEach((child) => child.stdin!.write("end\n"))))
  return (prefix: string): Effect.Effect<RawRun> =>
    Effect.gen(function*() {
      const serverBefore = yield* Effect.promise(() => serverCpu(db.url))
      const started = performance.now()
      for (const child of children) child.stdin!.write(`go ${prefix}\n`)
      const done = yield* linesMatching(/^DONE ([\d.]+)/)
      const seconds = (performance.now() - started) / 1000
      const serverAfter = yield* Effect.promise(() => serverCpu(db.url))
      for (const child of children) child.stdin!.write("rest\n")
      return {
        perSecond: WRITES / seconds,
        cpu: done.reduce((sum, match) => sum + Number(match[1]), 0) / WRITES,
        serverCpu: serverCpuSince(serverBefore, serverAfter) / WRITES
      }
    })
})

const ms = (n: number) => `${n.toFixed(1)} ms`
const cpu = (n: number) => `${n.toFixed(2)} ms`
const sum = (ns: ReadonlyArray<number>) => ns.reduce((a, b) => a + b, 0)
const p = (list: ReadonlyArray<number>) => `${ms(percentile(list, 0.5))} / ${ms(percentile(list, 0.99))}`

/** Outbox page reads per write, all replicas together. */
const reads = (statements: ReadonlyArray<Record<string, number>>) => sum(statements.map((s) => s.fw_outbox_page ?? 0))

/** Statements per write of each replica (those sent at least once per 100 writes). */
const statementsTable = (title: string, statements: ReadonlyArray<Record<string, number>>) => {
  const keys = [...new Set(statements.flatMap((s) => Object.keys(s)))].filter((key) => statements.some((s) => (s[key] ?? 0) >= 0.01))
  table(`statements per write by replica, ${title}`, keys.map((key) => ({
    statement: key,
    ...Object.fromEntries(statements.map((s, i) => [`replica ${i}`, (s[key] ?? 0).toFixed(2)]))
  })))
}

/** Runs the fleet benchmark and prints its tables. */
export const main = Effect.gen(function*() {
  if (ONLY_SATURATED) {
    // History on, round robin, saturated, and nothing else: a profile of the replicas at saturation.
    return yield* Effect.scoped(Effect.gen(function*() {
      const fleetOn = yield* fleet(true)
      const run = yield* drive(fleetOn, "w", WRITES, undefined, roundRobin)
      table(`fleet, saturated only, history on: ${WRITES} writes, ${IN_FLIGHT} in flight`, [
        { what: "rpc writes/s", value: perSecond(run.perSecond) },
        { what: "CPU per write: replicas (all three)", value: cpu(sum(run.replicaCpu)) },
        { what: "CPU per write: each replica", value: run.replicaCpu.map(cpu).join(" / ") },
        { what: "CPU per write: PostgreSQL server", value: cpu(run.serverCpu) },
        { what: "CPU per write: load generator", value: cpu(run.clientCpu) },
        { what: "write → event p50 / p99: writing / other replicas", value: `${p(run.local)}; ${p(run.remote)}` },
      ])
      statementsTable("saturated, history on", run.statements)
      yield* stopForProfile(fleetOn.replicas)
    }))
  }
  if (!ONLY_PACED) {
    yield* Effect.scoped(Effect.gen(function*() {
      const runRaw = yield* rawPeer
      const fastify = yield* fastifyPeer
      const fleetOff = yield* fleet(false)
      const fleetOn = yield* fleet(true)
      const rounds: Array<{ readonly raw: RawRun; readonly peer: Run; readonly off: Run; readonly on: Run }> = []
      for (let round = 0; round < ROUNDS; round++) {
        const prefix = `w${round}`
        let raw: RawRun | undefined
        let peer: Run | undefined
        let off: Run | undefined
        let on: Run | undefined
        const steps = [
          Effect.map(runRaw(prefix), (run) => void (raw = run)),
          Effect.map(drive(fastify, prefix, WRITES, undefined, roundRobin), (run) => void (peer = run)).pipe(Effect.zipLeft(rest(fastify))),
          Effect.map(drive(fleetOff, prefix, WRITES, undefined, roundRobin), (run) => void (off = run)),
          Effect.map(drive(fleetOn, prefix, WRITES, undefined, roundRobin), (run) => void (on = run))
        ]
        // Each peer goes first, second, third and fourth in turn: the shared machine's speed drifts,
        // and a drift during a round must not favour the same peer every round.
        for (let step = 0; step < steps.length; step++) yield* steps[(step + round) % steps.length]!
        rounds.push({ raw: raw!, peer: peer!, off: off!, on: on! })
      }
      const ratio = (n: number) => `${n.toFixed(2)}×`
      const ratios = (pick: (round: (typeof rounds)[number]) => number) => rounds.map(pick)
      const offRatios = ratios(({ off, raw }) => off.perSecond / raw.perSecond)
      const onRatios = ratios(({ on, raw }) => on.perSecond / raw.perSecond)
      const peerRatios = ratios(({ peer, raw }) => peer.perSecond / raw.perSecond)
      const offPeerRatios = ratios(({ off, peer }) => off.perSecond / peer.perSecond)
      const onPeerRatios = ratios(({ on, peer }) => on.perSecond / peer.perSecond)
      table(`fleet, saturated, by round (each peer first in turn): ${WRITES} writes per run`, rounds.map(({ off, on, peer, raw }, round) => ({
        round: String(round + 1),
        "raw pg inserts/s": perSecond(raw.perSecond),
        "Fastify + pg writes/s": perSecond(peer.perSecond),
        "history off writes/s": perSecond(off.perSecond),
        "history on writes/s": perSecond(on.perSecond),
        "off / on vs Fastify": `${ratio(offPeerRatios[round]!)} / ${ratio(onPeerRatios[round]!)}`,
        "off / on vs raw": `${ratio(offRatios[round]!)} / ${ratio(onRatios[round]!)}`,
        "CPU/write Fastify: processes + server": `${cpu(sum(peer.replicaCpu))} + ${cpu(peer.serverCpu)}`,
        "CPU/write on: replicas + server": `${cpu(sum(on.replicaCpu))} + ${cpu(on.serverCpu)}`
      })))
      const pooled = (run: (round: (typeof rounds)[number]) => Run, pick: (run: Run) => ReadonlyArray<number>) =>
        rounds.flatMap((round) => pick(run(round))).sort((a, b) => a - b)
      const middle = (pick: (round: (typeof rounds)[number]) => number) => median(rounds.map(pick))
      const row = (what: string, value: string, vsPeer = "", vsRaw = "") => ({ what, value, "vs Fastify + pg": vsPeer, "vs raw pg": vsRaw })
      const latency = (what: string, run: (round: (typeof rounds)[number]) => Run) => [
        row(`${what}, saturated: write → event, writing process p50 / p99`, p(pooled(run, (r) => r.local))),
        row(`${what}, saturated: write → event, other processes p50 / p99`, p(pooled(run, (r) => r.remote)))
      ]
      table(
        `fleet, saturated: ${WRITES} writes over POST /rpc, ${IN_FLIGHT} in flight across 3 processes (Fastify + pg peer: NOTIFY ${PEER_NOTIFY === "after" ? "after the insert's commit" : "in the insert's transaction"}; raw pg peer: 3 processes × 16); medians of ${ROUNDS} rounds`,
        [
          row("raw pg inserts/s", perSecond(middle(({ raw }) => raw.perSecond)), "", "1.00×"),
          row("Fastify + pg writes/s (insert + NOTIFY, LISTEN)", perSecond(middle(({ peer }) => peer.perSecond)), "1.00×", ratio(median(peerRatios))),
          row("rpc writes/s, history off", perSecond(middle(({ off }) => off.perSecond)), ratio(median(offPeerRatios)), ratio(median(offRatios))),
          row("rpc writes/s, history on (sync)", perSecond(middle(({ on }) => on.perSecond)), ratio(median(onPeerRatios)), ratio(median(onRatios))),
          ...latency("history on", ({ on }) => on),
          row("history on, saturated: commit on writer → event on others p50 / p99", p(pooled(({ on }) => on, (r) => r.commitToRemote))),
          // The peer's writing process hears its own change through its LISTEN like the others.
          ...latency("Fastify + pg", ({ peer }) => peer),
          row("CPU per write: raw pg processes (all three)", cpu(middle(({ raw }) => raw.cpu))),
          row(
            "CPU per write: PostgreSQL server, raw pg / Fastify + pg / history off / on",
            [middle(({ raw }) => raw.serverCpu), middle(({ peer }) => peer.serverCpu), middle(({ off }) => off.serverCpu), middle(({ on }) => on.serverCpu)]
              .map(cpu).join(" / ")
          ),
          row(
            "CPU per write: serving processes (all three), Fastify + pg / history off / on",
            `${cpu(middle(({ peer }) => sum(peer.replicaCpu)))} / ${cpu(middle(({ off }) => sum(off.replicaCpu)))} / ${cpu(middle(({ on }) => sum(on.replicaCpu)))}`
          ),
          row("outbox reads per write (all three), history off / on", `${middle(({ off }) => reads(off.statements)).toFixed(2)} / ${middle(({ on }) => reads(on.statements)).toFixed(2)}`),
          row(
            "CPU per write: load generator (raw http), Fastify + pg / history off / on",
            `${cpu(middle(({ peer }) => peer.clientCpu))} / ${cpu(middle(({ off }) => off.clientCpu))} / ${cpu(middle(({ on }) => on.clientCpu))}`
          )
        ]
      )
      yield* stopForProfile([...fastify.replicas, ...fleetOff.replicas, ...fleetOn.replicas])
    }))
  }
  if (ONLY_ROUNDS) return
  yield* Effect.scoped(Effect.gen(function*() {
    const fleetOn = yield* fleet(true)
    const rows: Array<Record<string, string>> = []
    for (const rate of RATES) {
      const run = yield* drive(fleetOn, `r${rate}`, WRITES, rate, roundRobin)
      rows.push({
        "paced at": `${rate}/s`,
        achieved: `${perSecond(run.perSecond)}/s`,
        "writing replica p50 / p99": p(run.local),
        "other replicas p50 / p99": p(run.remote),
        "commit on writer → event on others p50 / p99": p(run.commitToRemote),
        "call p50 / p99": p(run.call),
        "CPU/write: replicas (3)": cpu(sum(run.replicaCpu)),
        "CPU/write: generator": cpu(run.clientCpu),
        "CPU/write: PostgreSQL": cpu(run.serverCpu),
        failed: String(run.failed),
        "outbox reads/write (3)": reads(run.statements).toFixed(2)
      })
    }
    if (rows.length > 0) table(`fleet, paced, history on: ${WRITES} writes per rate, round robin over 3 replicas (write → event latency)`, rows)
    const roles = yield* drive(fleetOn, "role", Math.min(WRITES, ROLE_RATE * 10), ROLE_RATE, () => 0)
    table(`fleet, CPU per write by role, history on: writes to replica 0 only at ${ROLE_RATE}/s`, [
      { role: "writing replica (rpc + store + outbox + own delivery)", "CPU per write": cpu(roles.replicaCpu[0]!) },
      { role: "receiving replica (NOTIFY + outbox read + delivery), each", "CPU per write": cpu((roles.replicaCpu[1]! + roles.replicaCpu[2]!) / 2) },
      { role: "load generator (raw http client)", "CPU per write": cpu(roles.clientCpu) },
      { role: `latency at ${ROLE_RATE}/s: writing / other replicas p50 / p99`, "CPU per write": `${p(roles.local)}; ${p(roles.remote)}` },
      { role: `latency at ${ROLE_RATE}/s: commit on writer → event on others p50 / p99`, "CPU per write": p(roles.commitToRemote) }
    ])
    statementsTable(`role run at ${ROLE_RATE}/s (replica 0 writes)`, roles.statements)
    yield* stopForProfile(fleetOn.replicas)
  }))
})

/** Entry used by `bench/index.ts`. */
export const run = () => Effect.runPromise(main)

if (process.argv[1]?.endsWith("fleet.ts")) await run()
