/**
 * Fleet benchmark (issues 16 and 24): three replicas of the harness app as real processes on one
 * PostgreSQL.
 * - committed writes per second through `POST /rpc` with 48 in flight across the three, row history
 *   on and off, against raw `pg` inserts of the same rows with 48 in flight from three processes
 *   (a pool of 16 each) in the same run;
 * - CPU time per write of each role (the replicas, the load generator's rpc client, the raw
 *   processes): on a shared machine throughput follows the CPU share a process gets, so these say
 *   where the time goes whatever else runs;
 * - write → change event latency on the writing replica and on the others (p50, p99), at the
 *   saturated rate and at a paced rate (`FW_BENCH_RATE` commits per second, default 1,000).
 * `FW_BENCH_WRITES` sets the writes per run (default 3,000). `FW_BENCH_PROFILE=<dir>` writes a CPU
 * profile of each replica of the saturated history-on run into `<dir>` (through `cpuProfile.mjs`;
 * the replicas are stopped with SIGTERM so that they write it): summarise one with
 * `npx tsx bench/profileSummary.ts <file>`.
 */
import { Effect, Redacted } from "effect"
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import pg from "pg"
import { RowHistory } from "../../src/history/index.js"
import * as SchemaDiffer from "../../src/kernel/SchemaDiffer.js"
import { PgClient } from "@effect/sql-pg"
import { create, Docs } from "../../test/fleet/app.js"
import * as Fleet from "../../test/fleet/support.js"
import { perSecond, table } from "../support.js"

const pgUrl = process.env.FW_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const WRITES = Number(process.env.FW_BENCH_WRITES ?? 3_000)
const RATE = Number(process.env.FW_BENCH_RATE ?? 1_000)
const IN_FLIGHT = 48
const PROFILE_DIR = process.env.FW_BENCH_PROFILE

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

/** CPU milliseconds a process has used (Linux `/proc`; `NaN` elsewhere). */
const cpuOf = (pid: number) => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return NaN
  }
}
const ownCpu = () => {
  const used = process.cpuUsage()
  return (used.user + used.system) / 1000
}

const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN

/** Writes over the replicas (round robin), `IN_FLIGHT` at once, optionally paced; returns writes/s and latencies. */
const writesOver = (history: boolean, paced: boolean) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(Effect.promise(freshDb), (db) => Effect.promise(db.drop))
    yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(db.url) })), Effect.orDie)
    const profile = PROFILE_DIR !== undefined && history && !paced
    const env = {
      ...(history ? {} : { FW_HISTORY: "off" }),
      ...(profile
        ? {
          NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import ${path.join(import.meta.dirname, "cpuProfile.mjs")}`.trim(),
          FW_CPU_PROFILE_DIR: PROFILE_DIR
        }
        : {})
    }
    const replicas = yield* Effect.all([0, 1, 2].map((i) => Fleet.start(`b${i}`, db.url, env)), { concurrency: "unbounded" })
    if (profile) {
      // Runs before the replicas' own finalizers (SIGKILL): a replica stopped by SIGTERM exits
      // normally and writes its profile.
      yield* Effect.addFinalizer(() =>
        Effect.forEach(replicas, (replica) =>
          Effect.async<void>((resume) => {
            if (replica.child.exitCode !== null) return resume(Effect.void)
            replica.child.once("exit", () => resume(Effect.void))
            replica.child.kill("SIGTERM")
          }).pipe(Effect.timeoutOption("20 seconds")), { concurrency: "unbounded", discard: true }))
    }
    // Warm up every replica's pool and caches.
    yield* Effect.forEach(Array.from({ length: 60 }, (_, i) => i), (i) => replicas[i % 3]!.client.call(create, { id: `warm-${i}`, title: "w" }), { concurrency: 12, discard: true })
    let transportErrors = 0
    const replicasBefore = replicas.map((replica) => cpuOf(replica.child.pid!))
    const clientBefore = ownCpu()
    const started = performance.now()
    const interval = 1000 / RATE
    yield* Effect.forEach(Array.from({ length: WRITES }, (_, i) => i), (i) =>
      Effect.gen(function*() {
        if (paced) {
          const due = started + i * interval - performance.now()
          if (due > 0) yield* Effect.sleep(due)
        }
        // A transport failure (the local HTTP client under load) is retried, and counted.
        yield* replicas[i % 3]!.client.call(create, { id: `w-${i}`, title: `t${i}` }).pipe(
          Effect.tapError((error) => Effect.sync(() => {
            transportErrors++
            if (transportErrors === 1) console.error("first transport error:", String(error), (error as { cause?: unknown }).cause)
          })),
          Effect.retry({ times: 3, while: (error) => error._tag === "RpcClientError" }),
          Effect.catchTag("DuplicateRow", () => Effect.void)
        )
      }), { concurrency: IN_FLIGHT, discard: true })
    const seconds = (performance.now() - started) / 1000
    const replicaCpu = replicas.reduce((sum, replica, i) => sum + cpuOf(replica.child.pid!) - replicasBefore[i]!, 0) / WRITES
    const clientCpu = (ownCpu() - clientBefore) / WRITES
    const expected = WRITES + 60
    const local: Array<number> = []
    const remote: Array<number> = []
    for (const replica of replicas) {
      const events = yield* Fleet.eventually(Effect.promise(async () => {
        const response = await fetch(`${replica.url}/_events`)
        return (await response.json()) as Array<{ id: string; remote: boolean; at: number; receivedAt: number }>
      }), (e) => e.length >= expected)
      for (const event of events) if (!event.id.startsWith("warm-")) (event.remote ? remote : local).push(event.receivedAt - event.at)
    }
    local.sort((a, b) => a - b)
    remote.sort((a, b) => a - b)
    if (transportErrors > 0) console.log(`(${transportErrors} transport errors retried)`)
    return { perSecond: WRITES / seconds, local, remote, replicaCpu, clientCpu }
  }))

/** Raw pg inserts of the same rows, 48 in flight from three processes (a pool of 16 each). */
const raw = Effect.scoped(Effect.gen(function*() {
  const db = yield* Effect.acquireRelease(Effect.promise(freshDb), (db) => Effect.promise(db.drop))
  yield* SchemaDiffer.apply([Docs]).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(db.url) })), Effect.orDie)
  const writer = path.join(import.meta.dirname, "rawWriter.ts")
  const children = yield* Effect.all([0, 1, 2].map((first) =>
    Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, ["--import", "tsx", writer], {
          env: { ...process.env, DATABASE_URL: db.url, FW_RAW_FIRST: String(first), FW_BENCH_WRITES: String(WRITES) },
          stdio: ["pipe", "pipe", "inherit"]
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
    )
  ))
  // Each child's output, line by line, as promises of the first line matching.
  const lineOf = (child: (typeof children)[number], pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      let out = ""
      child.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString()
        const match = pattern.exec(out)
        if (match !== null) resolve(match)
      })
      child.on("exit", (code) => reject(new Error(`raw writer exited (${code}): ${out}`)))
    })
  const done = children.map((child) => lineOf(child, /DONE ([\d.]+)/))
  yield* Effect.promise(() => Promise.all(children.map((child) => lineOf(child, /READY/))))
  const started = performance.now()
  for (const child of children) child.stdin!.write("go\n")
  const cpu = yield* Effect.promise(() => Promise.all(done))
  const seconds = (performance.now() - started) / 1000
  return { perSecond: WRITES / seconds, cpu: cpu.reduce((sum, match) => sum + Number(match[1]), 0) / WRITES }
}))

const ms = (n: number) => `${n.toFixed(1)} ms`

/** Runs the fleet benchmark and prints its table. */
export const main = Effect.gen(function*() {
  const rawRun = yield* raw
  const rawRate = rawRun.perSecond
  const off = yield* writesOver(false, false)
  const on = yield* writesOver(true, false)
  const paced = yield* writesOver(true, true)
  const row = (what: string, value: string, ratio = "") => ({ what, value, "vs raw pg": ratio })
  const cpu = (n: number) => `${n.toFixed(2)} ms`
  table(`fleet: ${WRITES} writes over POST /rpc, ${IN_FLIGHT} in flight across 3 replica processes (raw pg peer: 3 processes × 16)`, [
    row("raw pg inserts/s", perSecond(rawRate), "1.00×"),
    row("rpc writes/s, history off", perSecond(off.perSecond), `${(off.perSecond / rawRate).toFixed(2)}×`),
    row("rpc writes/s, history on (sync)", perSecond(on.perSecond), `${(on.perSecond / rawRate).toFixed(2)}×`),
    row("history on: write → event, writing replica p50 / p99", `${ms(percentile(on.local, 0.5))} / ${ms(percentile(on.local, 0.99))}`),
    row("history on: write → event, other replicas p50 / p99", `${ms(percentile(on.remote, 0.5))} / ${ms(percentile(on.remote, 0.99))}`),
    row(`paced at ${RATE}/s (achieved ${perSecond(paced.perSecond)}/s): writing replica p50 / p99`, `${ms(percentile(paced.local, 0.5))} / ${ms(percentile(paced.local, 0.99))}`),
    row(`paced at ${RATE}/s: other replicas p50 / p99`, `${ms(percentile(paced.remote, 0.5))} / ${ms(percentile(paced.remote, 0.99))}`),
    row("CPU per write: raw pg processes (all three)", cpu(rawRun.cpu)),
    row("CPU per write: replicas (all three), history off / on", `${cpu(off.replicaCpu)} / ${cpu(on.replicaCpu)}`),
    row("CPU per write: load generator (rpc client), history off / on", `${cpu(off.clientCpu)} / ${cpu(on.clientCpu)}`)
  ])
})

/** Entry used by `bench/index.ts`. */
export const run = () => Effect.runPromise(main)

if (process.argv[1]?.endsWith("fleet.ts")) await run()
