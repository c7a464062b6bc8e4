/**
 * A GET REST route with decode, a guard and an ETag under autocannon load, against a bare
 * HttpLayerRouter route and a Fastify route doing the same work, in alternating rounds.
 */
import { load, perSecond, startServer, table } from "./support.js"

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

export const run = async () => {
  const fw = await startServer("restServer.ts")
  const fastify = await startServer("fastifyServer.ts")
  try {
    const headers = { authorization: "Bearer bench" }
    const runs = {
      "fw REST route": (duration: number) => load({ url: `http://127.0.0.1:${fw.port}/items/42`, headers, duration }),
      "bare HttpLayerRouter route": (duration: number) => load({ url: `http://127.0.0.1:${fw.port}/bare/items/42`, headers, duration }),
      "Fastify route": (duration: number) => load({ url: `http://127.0.0.1:${fastify.port}/items/42`, headers, duration })
    }
    for (const warm of Object.values(runs)) await warm(2)
    const results: Record<string, Array<number>> = { "fw REST route": [], "bare HttpLayerRouter route": [], "Fastify route": [] }
    for (let round = 0; round < 3; round++) {
      for (const [name, measure] of Object.entries(runs)) results[name]!.push(await measure(3))
    }
    const bare = results["bare HttpLayerRouter route"]!
    table("GET route with decode, guard and ETag (32 connections; medians of 3 alternating rounds)", Object.entries(results).map(([name, values]) => ({
      route: name,
      "req/s": perSecond(median(values)),
      "ratio vs bare": Number(median(values.map((v, i) => v / bare[i]!)).toFixed(2))
    })))
  } finally {
    fw.stop()
    fastify.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
