/**
 * rpc round trips per second over `POST /rpc` and over one WebSocket, against a bare
 * HttpLayerRouter route doing the same work (decode, a store read, encode), all in one run.
 */
import WebSocket from "ws"
import { load, perSecond, startServer, table } from "./support.js"

const frame = (id: number) =>
  JSON.stringify({ _tag: "Request", id: String(id), tag: "items.get", payload: { id: "i1" }, headers: [["authorization", "Bearer bench"]] })

/** Round trips per second over one socket with `inFlight` requests outstanding. */
const overWebSocket = (url: string, seconds: number, inFlight: number) =>
  new Promise<number>((resolve, reject) => {
    const socket = new WebSocket(url)
    let next = 0
    let done = 0
    let stopping = false
    socket.on("open", () => {
      const started = performance.now()
      setTimeout(() => {
        stopping = true
        resolve(done / ((performance.now() - started) / 1000))
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

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

export const run = async () => {
  const server = await startServer("rpcServer.ts")
  try {
    const base = `http://127.0.0.1:${server.port}`
    const body = JSON.stringify({ id: "i1" })
    const bareRun = (duration: number) => load({ url: `${base}/bare`, method: "POST", body, duration })
    const rpcRun = (duration: number) =>
      load({ url: `${base}/rpc`, method: "POST", body: frame(1), headers: { authorization: "Bearer bench" }, duration })
    // Warm up both paths (JIT), then alternate short rounds so machine noise hits both alike.
    await bareRun(2)
    await rpcRun(2)
    const bare: Array<number> = []
    const http: Array<number> = []
    const ws: Array<number> = []
    for (let round = 0; round < 4; round++) {
      bare.push(await bareRun(3))
      http.push(await rpcRun(3))
      ws.push(await overWebSocket(`ws://127.0.0.1:${server.port}/rpc`, 3, 32))
    }
    const ratio = (values: ReadonlyArray<number>) => Number(median(values.map((v, i) => v / bare[i]!)).toFixed(2))
    table("rpc round trips per second (32 concurrent; medians of 4 alternating rounds)", [
      { path: "bare HttpLayerRouter route", "req/s": perSecond(median(bare)), "ratio vs bare": 1 },
      { path: "POST /rpc", "req/s": perSecond(median(http)), "ratio vs bare": ratio(http) },
      { path: "one WebSocket (32 in flight)", "req/s": perSecond(median(ws)), "ratio vs bare": ratio(ws) }
    ])
  } finally {
    server.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
