/**
 * Interleaved A/B of the rpc WebSocket path: server CPU per call of `items.get` over one socket
 * with 32 calls in flight, the server of tree A (FW_AB_A) against tree B (FW_AB_B), alternating.
 * `npx tsx scratchpad/wsAB.ts` with FW_AB_A=/work/main FW_AB_B=/work/wt-review-fast (rounds: FW_AB_ROUNDS).
 */
import WebSocket from "ws"

const frame = (id: number) =>
  JSON.stringify({ _tag: "Request", id: String(id), tag: "items.get", payload: { id: "i1" }, headers: [["authorization", "Bearer bench"]] })

interface ServerProcess { readonly port: number; readonly stop: () => void; readonly cpuMicros: () => number }

const start = async (tree: string): Promise<ServerProcess> => {
  const harness = await import(`${tree}/bench/http/harness.ts`) as { startServer: (file: string) => Promise<ServerProcess> }
  return harness.startServer("../rpcServer.ts")
}

const cpuPerCall = (server: ServerProcess, seconds: number) =>
  new Promise<number>((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${server.port}/rpc`, { headers: { authorization: "Bearer bench" } })
    let next = 0
    let done = 0
    let stopping = false
    socket.on("open", () => {
      const before = server.cpuMicros()
      setTimeout(() => {
        stopping = true
        resolve((server.cpuMicros() - before) / done)
        socket.close()
      }, seconds * 1000)
      for (let i = 0; i < 32; i++) socket.send(frame(next++))
    })
    socket.on("message", (data) => {
      const text = data.toString()
      if (!text.includes(`"Success"`)) return reject(new Error(text))
      done++
      if (!stopping) socket.send(frame(next++))
    })
    socket.on("error", reject)
  })

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const main = async () => {
  const a = await start(process.env.FW_AB_A!)
  const b = await start(process.env.FW_AB_B!)
  const rounds = Number(process.env.FW_AB_ROUNDS ?? 7)
  const results: Record<"A" | "B", Array<number>> = { A: [], B: [] }
  try {
    await cpuPerCall(a, 2)
    await cpuPerCall(b, 2)
    for (let i = 0; i < rounds; i++) {
      results.A.push(await cpuPerCall(a, 3))
      results.B.push(await cpuPerCall(b, 3))
    }
  } finally {
    a.stop()
    b.stop()
  }
  console.log(JSON.stringify({ A: results.A.map((x) => x.toFixed(2)), B: results.B.map((x) => x.toFixed(2)), medianA: median(results.A).toFixed(2), medianB: median(results.B).toFixed(2) }))
}
void main()
