/**
 * SSE fan-out: 1,000 concurrent subscribers of one live query on one server process, spread over
 * several client processes (so the floor is not one client's parsing); after each of 20 commits,
 * the time from the commit request to every subscriber's delta. Reports the time to the last
 * subscriber's delta (p50, p99 over the commits), per-subscriber delivery (p50, p99) and the
 * server's own CPU time per commit, for the projected live query and, as the floor, a bare SSE
 * route that forwards the change with no query re-run, measured in the same run.
 *
 * `npx tsx bench/http/sse.ts` (`SSE_CLIENTS=n` client processes, default 4; `SSE_PROF=dir` profiles the
 * whole server run, `SSE_PROF_DIR=dir` only the commits of each stream kind)
 */
import { fork } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { quantile, type ServerProcess, startServer, table } from "./harness.js"
import type { Report, Start } from "./sseClient.js"

const SUBSCRIBERS = 1_000
const COMMITS = 20
const CLIENTS = Number(process.env["SSE_CLIENTS"] ?? 4)
const here = path.dirname(fileURLToPath(import.meta.url))
const now = () => performance.timeOrigin + performance.now()

interface Result {
  readonly last: ReadonlyArray<number>
  readonly each: ReadonlyArray<number>
  readonly cpuMsPerCommit: number
}

const measure = async (server: ServerProcess, streamPath: string, firstValue: number): Promise<Result> => {
  const delivered = new Map<number, Array<ReadonlyArray<number>>>()
  let wanted: { readonly n: number; readonly resolve: () => void } | undefined
  const check = () => {
    if (wanted !== undefined && (delivered.get(wanted.n)?.length ?? 0) === CLIENTS) {
      const { resolve } = wanted
      wanted = undefined
      resolve()
    }
  }
  const clients = await Promise.all(Array.from({ length: CLIENTS }, (_, index) =>
    new Promise<ReturnType<typeof fork>>((resolve, reject) => {
      const child = fork(path.join(here, "sseClient.ts"), { execArgv: ["--import", "tsx"], stdio: "inherit" })
      const count = Math.floor(SUBSCRIBERS / CLIENTS) + (index < SUBSCRIBERS % CLIENTS ? 1 : 0)
      child.on("message", (report: Report) => {
        if (report._tag === "Ready") return resolve(child)
        delivered.set(report.n, [...(delivered.get(report.n) ?? []), report.times])
        check()
      })
      child.on("error", reject)
      child.send({ port: server.port, path: streamPath, count } satisfies Start)
    })))
  const last: Array<number> = []
  const each: Array<number> = []
  const profile = (what: string) =>
    process.env["SSE_PROF_DIR"] === undefined ? Promise.resolve() : fetch(`http://127.0.0.1:${server.port}/bench/profile/${what}`, { method: "POST" }).then(() => undefined)
  await profile("start")
  const cpuBefore = server.cpuMicros()
  for (let n = firstValue; n < firstValue + COMMITS; n++) {
    const done = new Promise<void>((resolve) => (wanted = { n, resolve }))
    const start = now()
    const response = await fetch(`http://127.0.0.1:${server.port}/v1/ticks/add`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ n })
    })
    if (response.status !== 200) throw new Error(`commit ${n}: ${response.status}`)
    check()
    await done
    const times = delivered.get(n)!.flat().map((at) => at - start)
    each.push(...times)
    last.push(Math.max(...times))
  }
  const cpuMsPerCommit = (server.cpuMicros() - cpuBefore) / 1000 / COMMITS
  await profile(`stop?name=${streamPath.split("/").join("_")}`)
  for (const client of clients) client.disconnect()
  return { last, each, cpuMsPerCommit }
}

const row = (name: string, result: Result) => ({
  stream: name,
  "commit → last delta p50 ms": Number(quantile(result.last, 0.5).toFixed(1)),
  "p99 ms": Number(quantile(result.last, 0.99).toFixed(1)),
  "per subscriber p50 ms": Number(quantile(result.each, 0.5).toFixed(1)),
  "per subscriber p99 ms": Number(quantile(result.each, 0.99).toFixed(1)),
  "server CPU ms / commit": Number(result.cpuMsPerCommit.toFixed(1))
})

export const run = async () => {
  const server = await startServer("sseServer.ts", process.env["SSE_PROF"] ? ["--cpu-prof", "--cpu-prof-dir", process.env["SSE_PROF"]] : [])
  try {
    const live = await measure(server, "/v1/ticks/latest", 1)
    const bare = await measure(server, "/bare/ticks", 1_000)
    table(`SSE fan-out: ${SUBSCRIBERS} subscribers over ${CLIENTS} client processes, ${COMMITS} commits (one server process)`, [
      row("projected live query (shared re-run, guards per subscriber)", live),
      row("bare SSE forward of the change (floor)", bare)
    ])
    console.log(`last-delta ratio live / bare (p50): ${(quantile(live.last, 0.5) / quantile(bare.last, 0.5)).toFixed(2)}`)
    console.log(`server CPU per commit, live / bare: ${(live.cpuMsPerCommit / bare.cpuMsPerCommit).toFixed(2)}`)
  } finally {
    server.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
