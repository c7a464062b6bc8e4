/**
 * rpc round trips of a guarded query (`items.get`: decode, scope guard, a store read, encode) over
 * `POST /rpc`, as plain JSON over `POST /rpc/items.get`, and over one WebSocket with 32 calls in
 * flight, against Fastify `POST /rpc` and `POST /rpc/items.get` routes doing the same work (`http/rpcFastifyServer.ts`) and a bare HttpLayerRouter route in the fw
 * process, all in one run, in alternating rounds. Prints req/s, the server process's CPU time per
 * call, and the ratios against Fastify (CPU is the steadier figure on a loaded machine).
 *
 * Both servers run bundled by plain `node`, as the built package runs (`rpcBundle.ts`: under tsx,
 * every named function fw makes per request costs an `Object.defineProperty`); `FW_BENCH_TSX=1`
 * runs them under tsx as earlier sessions measured.
 *
 * `npx tsx bench/rpc.ts`
 */
import WebSocket from "ws"
import { measureCpu, median, perSecond, type ServerProcess, table } from "./http/harness.js"
import { startBundled } from "./rpcBundle.js"

const frame = (id: number) =>
  JSON.stringify({ _tag: "Request", id: String(id), tag: "items.get", payload: { id: "i1" }, headers: [["authorization", "Bearer bench"]] })

/** Round trips per second over one socket with `inFlight` requests outstanding, and the server's CPU per call. */
const overWebSocket = (server: ServerProcess, seconds: number, inFlight: number) =>
  new Promise<{ perSecond: number; cpu: number }>((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${server.port}/rpc`, { headers: { authorization: "Bearer bench" } })
    let next = 0
    let done = 0
    let stopping = false
    socket.on("open", () => {
      const started = performance.now()
      const before = server.cpuMicros()
      setTimeout(() => {
        stopping = true
        resolve({ perSecond: done / ((performance.now() - started) / 1000), cpu: (server.cpuMicros() - before) / done })
        socket.close()
      }, seconds * 1000)
      for (let i = 0; i < inFlight; i++) socket.send(frame(next++))
    })
    socket.on("message", (data) => {
      const text = data.toString()
      if (!text.includes(`"Exit"`)) return
      if (!text.includes(`"Success"`)) return reject(new Error(text))
      done++
      if (!stopping) socket.send(frame(next++))
    })
    socket.on("error", reject)
  })

/** The plain-JSON form of the same call: the input as the body (`POST /rpc/<tag>`). */
const plain = JSON.stringify({ id: "i1" })

export const run = async () => {
  const fw = await startBundled("bench/rpcServer.ts", "rpcServer")
  const fastify = await startBundled("bench/http/rpcFastifyServer.ts", "rpcFastifyServer")
  try {
    const headers = { authorization: "Bearer bench", "content-type": "application/json" }
    const post = (server: ServerProcess, path: string, body: string, duration: number) =>
      measureCpu(server, { url: `http://127.0.0.1:${server.port}${path}`, method: "POST", body, headers, duration })
    const runs = {
      "Fastify POST /rpc": (duration: number) => post(fastify, "/rpc", frame(1), duration),
      "bare HttpLayerRouter route": (duration: number) => post(fw, "/bare", JSON.stringify({ id: "i1" }), duration),
      "Fastify POST /rpc/items.get (plain JSON)": (duration: number) => post(fastify, "/rpc/items.get", plain, duration),
      "fw POST /rpc": (duration: number) => post(fw, "/rpc", frame(1), duration),
      "fw POST /rpc/items.get (plain JSON)": (duration: number) => post(fw, "/rpc/items.get", plain, duration),
      "fw one WebSocket (32 in flight)": async (duration: number) => {
        const result = await overWebSocket(fw, duration, 32)
        return { perSecond: result.perSecond, cpuMicrosPerRequest: result.cpu }
      }
    }
    // Warm up every path (JIT), then alternate short rounds so machine noise hits all alike.
    for (const go of Object.values(runs)) await go(2)
    const results: Record<string, Array<{ perSecond: number; cpu: number }>> = {}
    for (let round = 0; round < 4; round++) {
      for (const [name, go] of Object.entries(runs)) {
        const result = await go(3)
        ;(results[name] ??= []).push({ perSecond: result.perSecond, cpu: result.cpuMicrosPerRequest })
      }
    }
    const peer = results["Fastify POST /rpc"]!
    table(
      "rpc round trips of a guarded query (32 concurrent; medians of 4 alternating 3 s rounds; ratios vs Fastify: throughput and server CPU per call)",
      Object.entries(results).map(([name, values]) => ({
        path: name,
        "req/s": perSecond(median(values.map((v) => v.perSecond))),
        "server CPU µs/call": Number(median(values.map((v) => v.cpu)).toFixed(1)),
        "req/s vs Fastify": Number(median(values.map((v, i) => v.perSecond / peer[i]!.perSecond)).toFixed(2)),
        "CPU vs Fastify": Number(median(values.map((v, i) => peer[i]!.cpu / v.cpu)).toFixed(2))
      }))
    )
  } finally {
    fw.stop()
    fastify.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
