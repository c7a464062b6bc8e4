/**
 * Writing-role A/B (issue 24): the CPU one fleet replica spends per `POST /rpc` write, for two or
 * more builds of the fleet harness's app, interleaved in the same minutes. Each round starts one
 * replica of every build in turn (the fleet tap, row history on, on one fresh PostgreSQL database),
 * warms it up, then sends it `FW_AB_WRITES` creates with `FW_AB_IN_FLIGHT` in flight from this
 * process and reads its CPU time (`/proc`); the median per build over `FW_AB_ROUNDS` rounds is
 * printed. A replica alone receives no other replica's changes: its CPU per write is the writing
 * role's (rpc, store, fused insert, announcement, own delivery), at saturation.
 *
 * `npx tsx bench/fleet/writerAb.ts [app.mjs …]`: the bundles to compare (made with
 * `Fleet.bundleApp`, or esbuild of another checkout's `test/fleet/app.ts`); without arguments, this
 * checkout's harness app alone. `FW_AB_WARM` warm-up writes (default 3,000: V8 is still compiling
 * the write path after a few hundred); `FW_AB_NODE_ARGS` adds options to each replica's `node`
 * (space-separated, e.g. `--heap-prof --heap-prof-dir=/tmp/heap`; the replica is then stopped
 * cleanly after each run, so that it writes what it recorded).
 */
import { Effect, Redacted } from "effect"
import * as http from "node:http"
import pg from "pg"
import { PgClient } from "@effect/sql-pg"
import { RowHistory } from "../../src/history/index.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import { Docs } from "../../test/fleet/app.js"
import * as Fleet from "../../test/fleet/support.js"
import { cpuOf, nodeArgsFrom, ownCpu, postRpc, table } from "../support.js"

const pgUrl = process.env.FW_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const WRITES = Number(process.env.FW_AB_WRITES ?? 6_000)
const WARM = Number(process.env.FW_AB_WARM ?? 3_000)
const ROUNDS = Number(process.env.FW_AB_ROUNDS ?? 3)
const IN_FLIGHT = Number(process.env.FW_AB_IN_FLIGHT ?? 16)
const PROF = process.env.FW_AB_PROF
const NODE_ARGS = nodeArgsFrom("FW_AB_NODE_ARGS")

const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT })

const post = (url: string, body: string) => postRpc(agent, url, body)

/** `writes` creates of `${prefix}-i`, `IN_FLIGHT` at once; resolves with the failures. */
const drive = (url: string, prefix: string, writes: number) =>
  new Promise<number>((resolve, reject) => {
    let next = 0
    let done = 0
    let failed = 0
    const one = () => {
      const i = next++
      const body = JSON.stringify({ _tag: "Request", id: String(i), tag: "docs.create", payload: { id: `${prefix}-${i}`, title: `t${i}` }, headers: [] })
      post(`${url}/rpc`, body).then((ok) => {
        if (!ok) failed++
        if (++done === writes) resolve(failed)
        else if (next < writes) one()
      }, reject)
    }
    for (let k = 0; k < Math.min(IN_FLIGHT, writes); k++) one()
  })

const median = (ns: ReadonlyArray<number>) => {
  const sorted = [...ns].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

const main = Effect.gen(function*() {
  const apps = process.argv.slice(2)
  if (apps.length === 0) apps.push(yield* Effect.promise(() => Fleet.bundleApp("app.ts")))
  const name = `fw_bench_ab_${Date.now().toString(36)}`
  yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const admin = new pg.Client({ connectionString: pgUrl })
      await admin.connect()
      await admin.query(`CREATE DATABASE ${name}`)
      await admin.end()
    }),
    () =>
      Effect.promise(async () => {
        const admin = new pg.Client({ connectionString: pgUrl })
        await admin.connect()
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
        await admin.end()
      })
  )
  const url = new URL(pgUrl)
  url.pathname = `/${name}`
  const dbUrl = url.toString()
  yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(dbUrl) })), Effect.orDie)
  const cpu = apps.map(() => [] as Array<number>)
  const rates = apps.map(() => [] as Array<number>)
  const client = apps.map(() => [] as Array<number>)
  for (let round = 0; round < ROUNDS; round++) {
    for (let a = 0; a < apps.length; a++) {
      yield* Effect.scoped(Effect.gen(function*() {
        const { child, url } = yield* Fleet.spawnApp(`ab${a}`, apps[a]!, { DATABASE_URL: dbUrl, FW_POLL_MS: "1000" }, [
          ...NODE_ARGS,
          ...(PROF === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${PROF}/${a}`])
        ])
        yield* Effect.promise(() => drive(url, `warm${round}x${a}`, WARM))
        const before = cpuOf(child.pid!)
        const clientBefore = ownCpu()
        const started = performance.now()
        const failed = yield* Effect.promise(() => drive(url, `w${round}x${a}`, WRITES))
        const seconds = (performance.now() - started) / 1000
        cpu[a]!.push((cpuOf(child.pid!) - before) / WRITES)
        client[a]!.push((ownCpu() - clientBefore) / WRITES)
        rates[a]!.push(WRITES / seconds)
        if (failed > 0) console.log(`(${apps[a]}: ${failed} failed)`)
        // A profiled replica writes its profile on a clean exit only.
        if (PROF !== undefined || NODE_ARGS.length > 0) yield* Effect.promise(() => new Promise<void>((resolve) => {
          child.once("exit", () => resolve())
          child.kill("SIGTERM")
        }))
      }))
    }
  }
  table(`writing replica alone, saturated: ${WRITES} writes after ${WARM} warm-up, ${IN_FLIGHT} in flight, median of ${ROUNDS} interleaved rounds`, apps.map((app, a) => ({
    app,
    "replica CPU per write": `${(median(cpu[a]!) * 1000).toFixed(0)} µs`,
    runs: cpu[a]!.map((n) => (n * 1000).toFixed(0)).join(" "),
    "writes/s": median(rates[a]!).toFixed(0),
    "generator CPU per write": `${(median(client[a]!) * 1000).toFixed(0)} µs`
  })))
})

await Effect.runPromise(Effect.scoped(main))
