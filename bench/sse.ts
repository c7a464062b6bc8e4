/**
 * SSE fan-out: 1,000 concurrent subscribers of one live query on one process; the time from a
 * commit to the last subscriber's delta (p50, p99 over the commits).
 */
import { request } from "node:http"
import { startServer, table } from "./support.js"

const SUBSCRIBERS = 1_000
const COMMITS = 20

export const run = async () => {
  const server = await startServer("sseServer.ts")
  const seen = new Array<number>(SUBSCRIBERS).fill(0)
  const waiters: Array<{ target: number; resolve: () => void }> = []
  const check = () => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (seen.every((count) => count >= waiters[i]!.target)) {
        waiters[i]!.resolve()
        waiters.splice(i, 1)
      }
    }
  }
  const requests = await Promise.all(Array.from({ length: SUBSCRIBERS }, (_, index) =>
    new Promise<ReturnType<typeof request>>((resolve) => {
      const req = request({ host: "127.0.0.1", port: server.port, path: "/v1/ticks/latest", agent: false }, (res) => {
        res.setEncoding("utf8")
        res.on("data", (text: string) => {
          const events = text.split("event: ").length - 1
          if (events > 0) {
            seen[index]! += events
            check()
          }
        })
        resolve(req)
      })
      req.end()
    })))
  const allReached = (target: number) => new Promise<void>((resolve) => {
    waiters.push({ target, resolve })
    check()
  })
  await allReached(1) // every snapshot arrived
  const latencies: Array<number> = []
  for (let n = 1; n <= COMMITS; n++) {
    const start = performance.now()
    await fetch(`http://127.0.0.1:${server.port}/v1/ticks/add`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ n }) })
    await allReached(n + 1)
    latencies.push(performance.now() - start)
  }
  for (const req of requests) req.destroy()
  server.stop()
  latencies.sort((a, b) => a - b)
  const at = (q: number) => Number(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(1))
  table(`SSE fan-out: ${SUBSCRIBERS} subscribers of one live query, ${COMMITS} commits`, [
    { "commit → last delta p50 ms": at(0.5), "p99 ms": at(0.99), "max ms": at(1) }
  ])
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
