/**
 * The overhead of `gatedBy` on a procedure call over `POST /rpc`: the same query gated (the flag
 * evaluates on) and ungated. Twice: over sockets against a server in its own process (autocannon,
 * alternating rounds), and in one process through the router's web handler (alternating batches),
 * which keeps the load generator's CPU out of the figure. Aim: gated ≥ 0.95× ungated.
 */
import { FetchHttpClient, HttpLayerRouter } from "@effect/platform"
import { Layer } from "effect"
import * as Runtime from "../../src/app/Runtime.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Server from "../../src/server/Server.js"
import { load, perSecond, startServer, table } from "../support.js"
import { app, seed } from "./gatedApp.js"

const frame = (tag: string) =>
  JSON.stringify({ _tag: "Request", id: "1", tag, payload: { id: "i1" }, headers: [["authorization", "Bearer bench"]] })

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const ROUNDS = Number(process.env.FLAGS_BENCH_ROUNDS ?? 5)
const SECONDS = Number(process.env.FLAGS_BENCH_SECONDS ?? 3)

const inProcess = async () => {
  const routes = Server.routes(app).pipe(
    Layer.provide(Runtime.layer(app)),
    Layer.provideMerge(seed),
    Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
    Layer.provide(FetchHttpClient.layer)
  )
  const { dispose, handler } = HttpLayerRouter.toWebHandler(routes, { disableLogger: true })
  // CPU time per request beside the wall clock: on a shared, loaded machine the wall clock also
  // counts time the process waited for a core, CPU time only the work done.
  const cpu: Record<string, Array<number>> = { "items.open": [], "items.gated": [] }
  const batch = async (tag: string, n: number) => {
    const start = performance.now()
    const cpuStart = process.cpuUsage()
    for (let i = 0; i < n; i++) {
      const response = await handler(new Request("http://bench/rpc", {
        method: "POST",
        headers: { authorization: "Bearer bench", "content-type": "application/json" },
        body: frame(tag)
      }))
      const text = await response.text()
      if (!text.includes(`"Success"`)) throw new Error(`${tag}: ${text}`)
    }
    const used = process.cpuUsage(cpuStart)
    cpu[tag]!.push((used.user + used.system) / n)
    return n / ((performance.now() - start) / 1000)
  }
  await batch("items.open", 500)
  await batch("items.gated", 500)
  cpu["items.open"] = []
  cpu["items.gated"] = []
  const open: Array<number> = []
  const gated: Array<number> = []
  for (let round = 0; round < 20; round++) {
    if (round % 2 === 0) {
      open.push(await batch("items.open", 500))
      gated.push(await batch("items.gated", 500))
    } else {
      gated.push(await batch("items.gated", 500))
      open.push(await batch("items.open", 500))
    }
  }
  await dispose()
  const ratio = median(gated.map((g, i) => g / open[i]!))
  const cpuOpen = cpu["items.open"]!
  const cpuGated = cpu["items.gated"]!
  const cpuRatio = median(cpuGated.map((g, i) => cpuOpen[i]! / g))
  table("gatedBy over POST /rpc in one process (web handler; medians of 20 alternating batches of 500)", [
    { call: "items.open (ungated)", "req/s": perSecond(median(open)), "ratio vs ungated": 1, "CPU µs/req": Math.round(median(cpuOpen)), "CPU ratio": 1 },
    {
      call: "items.gated (gatedBy, flag on)",
      "req/s": perSecond(median(gated)),
      "ratio vs ungated": Number(ratio.toFixed(3)),
      "CPU µs/req": Math.round(median(cpuGated)),
      "CPU ratio": Number(cpuRatio.toFixed(3))
    }
  ])
}

export const run = async () => {
  await inProcess()
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
