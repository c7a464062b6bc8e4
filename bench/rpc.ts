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

export const run = async () => {
  const server = await startServer("rpcServer.ts")
  try {
    const base = `http://127.0.0.1:${server.port}`
    const body = JSON.stringify({ id: "i1" })
    // Warm up both paths (JIT) before measuring.
    await load({ url: `${base}/bare`, method: "POST", body, duration: 2 })
    await load({ url: `${base}/rpc`, method: "POST", body: frame(1), headers: { authorization: "Bearer bench" }, duration: 2 })
    const bare = await load({ url: `${base}/bare`, method: "POST", body })
    const http = await load({ url: `${base}/rpc`, method: "POST", body: frame(1), headers: { authorization: "Bearer bench" } })
    const ws = await overWebSocket(`ws://127.0.0.1:${server.port}/rpc`, 5, 32)
    table("rpc round trips per second (32 concurrent)", [
      { path: "bare HttpLayerRouter route", "req/s": perSecond(bare), "ratio vs bare": 1 },
      { path: "POST /rpc", "req/s": perSecond(http), "ratio vs bare": Number((http / bare).toFixed(2)) },
      { path: "one WebSocket (32 in flight)", "req/s": perSecond(ws), "ratio vs bare": Number((ws / bare).toFixed(2)) }
    ])
  } finally {
    server.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
