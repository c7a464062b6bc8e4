/**
 * Interleaved A/B of `POST /rpc` servers: each `name=file` is a bench server (fw's
 * `bench/rpcServer.ts` of some tree, or `bench/http/rpcFastifyServer.ts`), bundled next to itself
 * (`rpcBundle.ts`) and run by `node`; then rounds of autocannon (32 connections) against each in
 * turn, the order reversed every other round so drift hits all alike. Prints each round and, per
 * server, the median CPU per call (the server process's user + system time over the calls
 * answered), req/s, and the per-round ratios against the first server (medians).
 *
 * ```
 * git -C /work/main archive <base-ref> | tar -x -C /tmp/base && ln -s /work/main/node_modules /tmp/base/node_modules
 * ROUNDS=7 SECONDS=3 npx tsx bench/rpcAb.ts fastify=bench/http/rpcFastifyServer.ts base=/tmp/base/bench/rpcServer.ts new=bench/rpcServer.ts
 * ```
 *
 * `FW_BENCH_TSX=1` runs the files under tsx (from their own directory) instead of bundled.
 * `RATE=<req/s>` holds the load at that rate instead of saturating it: on a shared machine the
 * CPU per call then compares servers at the same load (a saturated server batches more per wake-up).
 */
import autocannon from "autocannon"
import { execFileSync, spawn } from "node:child_process"
import { rmSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { median, processCpuMicros } from "./http/harness.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const rounds = Number(process.env.ROUNDS ?? 7)
const seconds = Number(process.env.SECONDS ?? 3)
const rate = process.env.RATE === undefined ? undefined : Number(process.env.RATE)
// `FW_BENCH_TSX=1`: the servers run under tsx instead (see `rpcBundle.ts` for why that costs fw more).
const tsx = process.env.FW_BENCH_TSX === "1"
const frame = JSON.stringify({ _tag: "Request", id: "1", tag: "items.get", payload: { id: "i1" }, headers: [["authorization", "Bearer bench"]] })

interface Server {
  readonly name: string
  readonly port: number
  readonly pid: number
  readonly stop: () => void
}

const start = (name: string, file: string) =>
  new Promise<Server>((resolve, reject) => {
    const entry = path.resolve(file)
    const outfile = path.join(path.dirname(entry), `.ab-${name}.bundle.mjs`)
    if (!tsx) {
      execFileSync(path.join(here, "..", "node_modules", ".bin", "esbuild"), [
        entry, "--bundle", "--platform=node", "--format=esm", "--packages=external", `--outfile=${outfile}`, "--log-level=warning"
      ])
    }
    const child = spawn(process.execPath, tsx ? ["--import", "tsx", entry] : [outfile], { stdio: ["ignore", "pipe", "inherit"], cwd: path.dirname(entry) })
    child.stdout.on("data", (data: Buffer) => {
      const match = /PORT (\d+)/.exec(data.toString())
      if (match) {
        rmSync(outfile, { force: true })
        resolve({ name, port: Number(match[1]), pid: child.pid!, stop: () => child.kill("SIGINT") })
      }
    })
    child.on("exit", (code) => {
      rmSync(outfile, { force: true })
      reject(new Error(`${name} exited with ${code}`))
    })
  })

const round = async (server: Server, duration: number) => {
  const before = processCpuMicros(server.pid)
  const result = await autocannon({
    url: `http://127.0.0.1:${server.port}/rpc`,
    method: "POST",
    body: frame,
    headers: { authorization: "Bearer bench", "content-type": "application/json" },
    connections: 32,
    duration,
    ...(rate === undefined ? {} : { overallRate: rate })
  })
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${server.name}: ${result.non2xx} non-2xx, ${result.errors} errors`)
  return { perSecond: result.requests.average, cpu: (processCpuMicros(server.pid) - before) / result.requests.total }
}

const servers: Array<Server> = []
try {
  for (const arg of process.argv.slice(2)) {
    const at = arg.indexOf("=")
    servers.push(await start(arg.slice(0, at), arg.slice(at + 1)))
  }
  // Warm up every server (JIT), then the measured rounds.
  for (const server of servers) await round(server, 2)
  const results = new Map<string, Array<{ perSecond: number; cpu: number }>>(servers.map((server) => [server.name, []]))
  for (let i = 0; i < rounds; i++) {
    for (const server of i % 2 === 0 ? servers : [...servers].reverse()) results.get(server.name)!.push(await round(server, seconds))
    console.log(`round ${i + 1}: ${servers.map((server) => {
      const last = results.get(server.name)!.at(-1)!
      return `${server.name} ${last.cpu.toFixed(1)} µs ${Math.round(last.perSecond)}/s`
    }).join("   ")}`)
  }
  const base = results.get(servers[0]!.name)!
  for (const server of servers) {
    const values = results.get(server.name)!
    console.log(
      `${server.name.padEnd(10)} CPU ${median(values.map((v) => v.cpu)).toFixed(1)} µs/call, ${Math.round(median(values.map((v) => v.perSecond)))} req/s; ` +
        `vs ${servers[0]!.name}: CPU ${median(values.map((v, i) => base[i]!.cpu / v.cpu)).toFixed(3)}×, req/s ${
          median(values.map((v, i) => v.perSecond / base[i]!.perSecond)).toFixed(3)
        }×`
    )
  }
} finally {
  for (const server of servers) server.stop()
}
