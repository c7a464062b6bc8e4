/**
 * SSE fan-out: 1,000 concurrent subscribers of one live query on one server process; after each of
 * 20 commits, the time from the commit request to every subscriber's delta. Reports the time to
 * the last subscriber's delta (p50, p99 over the commits) and per-subscriber delivery (p50, p99),
 * for the projected live query and, as the floor, a bare SSE route that forwards the change with no
 * query re-run, measured in the same run.
 *
 * `npx tsx bench/http/sse.ts`
 */
import * as ExperimentalSse from "@effect/experimental/Sse"
import { request } from "node:http"
import { quantile, startServer, table } from "./harness.js"

const SUBSCRIBERS = 1_000
const COMMITS = 20

interface Result {
  readonly last: ReadonlyArray<number>
  readonly each: ReadonlyArray<number>
}

const measure = async (port: number, path: string, firstValue: number): Promise<Result> => {
  const received = Array.from({ length: SUBSCRIBERS }, () => new Map<number, number>())
  let wanted: { readonly n: number; readonly resolve: () => void } | undefined
  const check = () => {
    if (wanted !== undefined && received.every((seen) => seen.has(wanted!.n))) {
      const { resolve } = wanted
      wanted = undefined
      resolve()
    }
  }
  const sockets = await Promise.all(Array.from({ length: SUBSCRIBERS }, (_, index) =>
    new Promise<ReturnType<typeof request>>((resolve, reject) => {
      const parser = ExperimentalSse.makeParser((event) => {
        if (event._tag !== "Event" || event.event !== "delta") return
        const n = (JSON.parse(event.data) as { readonly data: number }).data
        received[index]!.set(n, performance.now())
        check()
      })
      const req = request({ host: "127.0.0.1", port, path, agent: false, headers: { accept: "text/event-stream" } }, (res) => {
        res.setEncoding("utf8")
        res.on("data", (text: string) => parser.feed(text))
        resolve(req)
      })
      req.on("error", reject)
      req.end()
    })))
  const last: Array<number> = []
  const each: Array<number> = []
  for (let n = firstValue; n < firstValue + COMMITS; n++) {
    const done = new Promise<void>((resolve) => (wanted = { n, resolve }))
    const start = performance.now()
    const response = await fetch(`http://127.0.0.1:${port}/v1/ticks/add`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ n })
    })
    if (response.status !== 200) throw new Error(`commit ${n}: ${response.status}`)
    check()
    await done
    const times = received.map((seen) => seen.get(n)! - start)
    each.push(...times)
    last.push(Math.max(...times))
  }
  for (const socket of sockets) socket.destroy()
  return { last, each }
}

const row = (name: string, result: Result) => ({
  stream: name,
  "commit → last delta p50 ms": Number(quantile(result.last, 0.5).toFixed(1)),
  "p99 ms": Number(quantile(result.last, 0.99).toFixed(1)),
  "per subscriber p50 ms": Number(quantile(result.each, 0.5).toFixed(1)),
  "per subscriber p99 ms": Number(quantile(result.each, 0.99).toFixed(1))
})

export const run = async () => {
  const server = await startServer("sseServer.ts")
  try {
    const live = await measure(server.port, "/v1/ticks/latest", 1)
    const bare = await measure(server.port, "/bare/ticks", 1_000)
    table(`SSE fan-out: ${SUBSCRIBERS} subscribers, ${COMMITS} commits (one server process)`, [
      row("projected live query (re-run + guards per subscriber)", live),
      row("bare SSE forward of the change (floor)", bare)
    ])
    console.log(`last-delta ratio live / bare (p50): ${(quantile(live.last, 0.5) / quantile(bare.last, 0.5)).toFixed(2)}`)
  } finally {
    server.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
