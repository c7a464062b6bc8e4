/**
 * A GET REST route with decode, a guard and an ETag under autocannon load, against a bare
 * `HttpLayerRouter` route and a Fastify route doing the same work, measured in the same run in
 * alternating rounds (3 s each). Prints req/s and the ratio against the bare route.
 *
 * `npx tsx bench/http/rest.ts`
 */
import { load, median, perSecond, startServer, table } from "./harness.js"

export const run = async () => {
  const fw = await startServer("restServer.ts")
  const fastify = await startServer("fastifyServer.ts")
  try {
    const headers = { authorization: "Bearer bench" }
    const targets: Record<string, string> = {
      "fw REST route": `http://127.0.0.1:${fw.port}/items/42`,
      "bare HttpLayerRouter route": `http://127.0.0.1:${fw.port}/bare/items/42`,
      "Fastify route": `http://127.0.0.1:${fastify.port}/items/42`
    }
    for (const url of Object.values(targets)) await load({ url, headers, duration: 2 })
    const results: Record<string, Array<number>> = Object.fromEntries(Object.keys(targets).map((name) => [name, []]))
    for (let round = 0; round < 5; round++) {
      for (const [name, url] of Object.entries(targets)) results[name]!.push(await load({ url, headers }))
    }
    const bare = results["bare HttpLayerRouter route"]!
    table(
      "GET route with decode, guard and ETag (32 connections; medians of 5 alternating 3 s rounds)",
      Object.entries(results).map(([name, values]) => ({
        route: name,
        "req/s": perSecond(median(values)),
        "ratio vs bare": Number(median(values.map((v, i) => v / bare[i]!)).toFixed(2))
      }))
    )
  } finally {
    fw.stop()
    fastify.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
