/**
 * SSE fan-out: 1,000 concurrent subscribers of one live query on one server process, spread over
 * several client processes; after each commit, the time from the commit request to every
 * subscriber's delta. Reports the time to the last subscriber's delta (p50, p99 over the commits),
 * per-subscriber delivery (p50, p99), the server's own CPU time per commit and the client
 * processes' CPU time per commit, for the projected live query and for the floor measured in the
 * same run: a bare `node:http` SSE listener in the server process that writes each committed change
 * of another table, preformatted, to its 1,000 sockets (same commit path, same change delivery,
 * no query re-run, no guards, no fiber per subscriber).
 *
 * Both sets of 1,000 streams stay open together; the commits alternate (live, floor, live, ...), so
 * both see the same machine load. Each kind gets `SSE_WARMUP` unmeasured commits first.
 *
 * `npx tsx bench/http/sse.ts` (`SSE_CLIENTS=n` client processes, default 4; `SSE_COMMITS=n` measured
 * commits per kind, default 20; `SSE_KINDS=live` or `floor` runs one kind; `SSE_PROF=dir` profiles
 * the whole server run, `SSE_PROF_DIR=dir` only the measured commits; `FW_BENCH_PLATFORM=1` serves
 * with the platform's Node server instead of fw's)
 */
import { type ChildProcess, fork } from "node:child_process"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath } from "node:url"
import { processCpuMicros, quantile, startServer, table } from "./harness.js"
import type { Report, Start } from "./sseClient.js"

const SUBSCRIBERS = 1_000
const COMMITS = Number(process.env["SSE_COMMITS"] ?? 20)
const WARMUP = Number(process.env["SSE_WARMUP"] ?? 3)
const CLIENTS = Number(process.env["SSE_CLIENTS"] ?? 4)
const KINDS = (process.env["SSE_KINDS"] ?? "live,floor").split(",")
const here = path.dirname(fileURLToPath(import.meta.url))
const now = () => performance.timeOrigin + performance.now()

interface Kind {
  readonly name: string
  /** The mutation that commits a value this kind's streams deliver. */
  readonly commitPath: string
  /** Its values start here (so every value names one kind). */
  readonly firstValue: number
  readonly last: Array<number>
  readonly each: Array<number>
  serverCpuMicros: number
  clientCpuMicros: number
}

const kindOf = (name: string, commitPath: string, firstValue: number): Kind =>
  ({ name, commitPath, firstValue, last: [], each: [], serverCpuMicros: 0, clientCpuMicros: 0 })

export const run = async () => {
  const server = await startServer("sseServer.ts", process.env["SSE_PROF"] ? ["--cpu-prof", "--cpu-prof-dir", process.env["SSE_PROF"]] : [])
  const clients: Array<ChildProcess> = []
  try {
    const base = `http://127.0.0.1:${server.port}`
    const floorPort = ((await (await fetch(`${base}/bench/floor`)).json()) as { readonly port: number }).port
    const kinds = [
      ...(KINDS.includes("live") ? [kindOf("projected live query (shared re-run, guards per subscriber)", "/v1/ticks/add", 1)] : []),
      ...(KINDS.includes("floor") ? [kindOf("floor: bare node:http write of the change", "/v1/floorTicks/add", 1_000_000)] : [])
    ]
    const targets = [
      ...(KINDS.includes("live") ? [{ port: server.port, path: "/v1/ticks/latest" }] : []),
      ...(KINDS.includes("floor") ? [{ port: floorPort, path: "/" }] : [])
    ]
    // Per value: the arrival times reported so far, one array per client process.
    const delivered = new Map<number, Array<ReadonlyArray<number>>>()
    let wanted: { readonly n: number; readonly resolve: () => void } | undefined
    const check = () => {
      if (wanted !== undefined && (delivered.get(wanted.n)?.length ?? 0) === CLIENTS) {
        const { resolve } = wanted
        wanted = undefined
        resolve()
      }
    }
    await Promise.all(Array.from({ length: CLIENTS }, (_, index) =>
      new Promise<void>((resolve, reject) => {
        const child = fork(path.join(here, "sseClient.ts"), { execArgv: ["--import", "tsx"], stdio: "inherit" })
        clients.push(child)
        const count = Math.floor(SUBSCRIBERS / CLIENTS) + (index < SUBSCRIBERS % CLIENTS ? 1 : 0)
        child.on("message", (report: Report) => {
          if (report._tag === "Ready") return resolve()
          delivered.set(report.n, [...(delivered.get(report.n) ?? []), report.times])
          check()
        })
        child.on("error", reject)
        child.send({ targets, count } satisfies Start)
      })))
    const clientCpu = () => clients.reduce((sum, child) => sum + processCpuMicros(child.pid!), 0)

    /** One commit of `kind`'s value `n`, awaited until every subscriber has its delta; measured unless warming up. */
    const commit = async (kind: Kind, n: number, measured: boolean) => {
      const done = new Promise<void>((resolve) => (wanted = { n, resolve }))
      const serverBefore = server.cpuMicros()
      const clientsBefore = clientCpu()
      const start = now()
      const response = await fetch(`${base}${kind.commitPath}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ n })
      })
      if (response.status !== 200) throw new Error(`commit ${n}: ${response.status}`)
      check()
      await done
      // Let the tail of the writes (socket callbacks) land in this commit's CPU, not the next one's.
      await sleep(30)
      if (!measured) return
      const times = delivered.get(n)!.flat().map((at) => at - start)
      kind.each.push(...times)
      kind.last.push(Math.max(...times))
      kind.serverCpuMicros += server.cpuMicros() - serverBefore
      kind.clientCpuMicros += clientCpu() - clientsBefore
      delivered.delete(n)
    }

    for (let i = 0; i < WARMUP; i++) for (const kind of kinds) await commit(kind, kind.firstValue + i, false)
    const profile = (what: string) =>
      process.env["SSE_PROF_DIR"] === undefined ? Promise.resolve() : fetch(`${base}/bench/profile/${what}`, { method: "POST" }).then(() => undefined)
    await profile("start")
    for (let i = WARMUP; i < WARMUP + COMMITS; i++) for (const kind of kinds) await commit(kind, kind.firstValue + i, true)
    await profile(`stop?name=${KINDS.join("+")}`)

    const row = (kind: Kind) => ({
      stream: kind.name,
      "commit → last delta p50 ms": Number(quantile(kind.last, 0.5).toFixed(1)),
      "p99 ms": Number(quantile(kind.last, 0.99).toFixed(1)),
      "per subscriber p50 ms": Number(quantile(kind.each, 0.5).toFixed(1)),
      "per subscriber p99 ms": Number(quantile(kind.each, 0.99).toFixed(1)),
      "server CPU ms / commit": Number((kind.serverCpuMicros / 1000 / COMMITS).toFixed(1)),
      "clients CPU ms / commit": Number((kind.clientCpuMicros / 1000 / COMMITS).toFixed(1))
    })
    table(
      `SSE fan-out: ${SUBSCRIBERS} subscribers over ${CLIENTS} client processes, ${COMMITS} commits per kind interleaved after ${WARMUP} warm-up (one server process, ${process.env["FW_BENCH_PLATFORM"] === "1" ? "platform NodeHttpServer" : "fw NodeServer"})`,
      kinds.map(row)
    )
    const [live, bare] = kinds
    if (live !== undefined && bare !== undefined) {
      console.log(`last-delta ratio live / floor (p50): ${(quantile(live.last, 0.5) / quantile(bare.last, 0.5)).toFixed(2)}`)
      console.log(`server CPU per commit, live / floor: ${(live.serverCpuMicros / bare.serverCpuMicros).toFixed(2)}`)
    }
  } finally {
    for (const client of clients) if (client.connected) client.disconnect()
    server.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
