/**
 * The REST benchmark without sockets: the routes of `restApp.ts` called through the router's web
 * handler in one process, in alternating batches of 500 requests (40 batches each, about 5 s).
 * This isolates the server's CPU per request from the load generator, which shares the machine's
 * cores in the socket benchmark.
 *
 * `npx tsx bench/http/restInProcess.ts`
 */
import { FetchHttpClient, HttpLayerRouter } from "@effect/platform"
import { Layer } from "effect"
import * as Runtime from "../../src/app/Runtime.js"
import * as Server from "../../src/server/Server.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import { perSecond, table } from "./harness.js"
import { app, bare } from "./restApp.js"

export const run = async () => {
  const routes = Layer.mergeAll(Server.routes(app), bare).pipe(
    Layer.provide(Runtime.layer(app)),
    Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
    Layer.provide(FetchHttpClient.layer)
  )
  const { dispose, handler } = HttpLayerRouter.toWebHandler(routes, { disableLogger: true })
  const headers = { authorization: "Bearer bench" }
  const batch = async (path: string, n: number) => {
    const start = performance.now()
    for (let i = 0; i < n; i++) {
      const response = await handler(new Request(`http://bench${path}`, { headers }))
      if (response.status !== 200) throw new Error(`${path}: ${response.status}`)
      await response.arrayBuffer()
    }
    return performance.now() - start
  }
  try {
    await batch("/items/42", 2_000)
    await batch("/bare/items/42", 2_000)
    let fw = 0
    let bareMs = 0
    for (let round = 0; round < 40; round++) {
      fw += await batch("/items/42", 500)
      bareMs += await batch("/bare/items/42", 500)
    }
    const requests = 40 * 500
    table("GET route with decode, guard and ETag, in process (20,000 requests each, alternating batches)", [
      { route: "fw REST route", "req/s": perSecond(requests / (fw / 1000)), "µs/request": Number((fw * 1000 / requests).toFixed(1)), "ratio vs bare": Number((bareMs / fw).toFixed(2)) },
      { route: "bare HttpLayerRouter route", "req/s": perSecond(requests / (bareMs / 1000)), "µs/request": Number((bareMs * 1000 / requests).toFixed(1)), "ratio vs bare": 1 }
    ])
  } finally {
    await dispose()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
