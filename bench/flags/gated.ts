/**
 * The overhead of `gatedBy` on a procedure call over `POST /rpc`: the same query gated (the flag
 * evaluates on) and ungated, on one server, in alternating rounds. Aim: gated ≥ 0.95× ungated.
 */
import { load, perSecond, startServer, table } from "../support.js"

const frame = (tag: string) =>
  JSON.stringify({ _tag: "Request", id: "1", tag, payload: { id: "i1" }, headers: [["authorization", "Bearer bench"]] })

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const ROUNDS = Number(process.env.FLAGS_BENCH_ROUNDS ?? 5)
const SECONDS = Number(process.env.FLAGS_BENCH_SECONDS ?? 3)

export const run = async () => {
  const server = await startServer("flags/gatedServer.ts")
  try {
    const url = `http://127.0.0.1:${server.port}/rpc`
    const once = (tag: string, duration: number) =>
      load({ url, method: "POST", body: frame(tag), headers: { authorization: "Bearer bench", "content-type": "application/json" }, duration })
    await once("items.open", 2)
    await once("items.gated", 2)
    const open: Array<number> = []
    const gated: Array<number> = []
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which goes first so drift on a shared machine hits both alike.
      if (round % 2 === 0) {
        open.push(await once("items.open", SECONDS))
        gated.push(await once("items.gated", SECONDS))
      } else {
        gated.push(await once("items.gated", SECONDS))
        open.push(await once("items.open", SECONDS))
      }
    }
    const ratio = median(gated.map((g, i) => g / open[i]!))
    table(`gatedBy over POST /rpc (32 connections; medians of ${ROUNDS} alternating rounds of ${SECONDS} s)`, [
      { call: "items.open (ungated)", "req/s": perSecond(median(open)), "ratio vs ungated": 1 },
      { call: "items.gated (gatedBy, flag on)", "req/s": perSecond(median(gated)), "ratio vs ungated": Number(ratio.toFixed(3)) }
    ])
  } finally {
    server.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
