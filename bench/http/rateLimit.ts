/**
 * The cost of a rate limit: the same GET route with and without `rateLimit` (a limit no request
 * reaches, so every request is counted and admitted), called through the router's web handler in
 * one process, in alternating batches of 500 requests, one at a time and 20 in flight. Measured on the memory counters and on the
 * PostgreSQL counters (one upsert per request; `FW_TEST_PG_URL`, default the local server), each
 * in wall time and in CPU time (which a loaded shared machine distorts less).
 *
 * `npx tsx bench/http/rateLimit.ts`
 */
import { FetchHttpClient, HttpLayerRouter } from "@effect/platform"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import * as Runtime from "../../src/app/Runtime.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Server from "../../src/server/Server.js"
import { pgReachable, pgUrl, scratchDatabase as scratch } from "../pgDatabase.js"
import { perSecond, table } from "./harness.js"

const subject = Subject.make({ type: "user", id: "bench", tenantId: "acme" })
const everyone: AuthStrategy.AuthStrategy = {
  id: "bench",
  outboundHosts: [],
  authenticate: () => Effect.succeed(AuthStrategy.Verdict.Authenticated({ subject }))
}

const item = () => Effect.succeed({ id: "42", title: "the answer" })
const app = defineApp({
  name: "rate-limit-bench",
  auth: [everyone],
  restRoutes: [
    defineRestRoute({ method: "GET", path: "/unlimited", handler: item }),
    defineRestRoute({ method: "GET", path: "/limited", rateLimit: { limit: 1_000_000_000, windowMs: 3_600_000 }, handler: item })
  ]
})

interface Sample {
  readonly wallMs: number
  readonly cpuMs: number
}

const measure = async (
  tier: string,
  storeLayer: Layer.Layer<Store.Store | ChangeTap.ChangeTap, unknown>,
  rounds: number,
  concurrency: number
) => {
  const routes = Server.routes(app).pipe(
    Layer.provide(Runtime.layer(app)),
    Layer.provide(storeLayer),
    Layer.provide(FetchHttpClient.layer)
  )
  const { dispose, handler } = HttpLayerRouter.toWebHandler(routes as Layer.Layer<never, never, HttpLayerRouter.HttpRouter>, {
    disableLogger: true
  })
  const batch = async (path: string, n: number): Promise<Sample> => {
    const cpu = process.cpuUsage()
    const start = performance.now()
    // `concurrency` callers, each sending its share one after the other.
    await Promise.all(Array.from({ length: concurrency }, async () => {
      for (let i = 0; i < n / concurrency; i++) {
        const response = await handler(new Request(`http://bench${path}`))
        if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`)
        await response.arrayBuffer()
      }
    }))
    const used = process.cpuUsage(cpu)
    return { wallMs: performance.now() - start, cpuMs: (used.user + used.system) / 1000 }
  }
  try {
    await batch("/limited", 1_000)
    await batch("/unlimited", 1_000)
    const totals = { limited: { wallMs: 0, cpuMs: 0 }, unlimited: { wallMs: 0, cpuMs: 0 } }
    for (let round = 0; round < rounds; round++) {
      // Alternating order, so neither side always runs on a warmer (or busier) machine.
      const order = round % 2 === 0 ? (["limited", "unlimited"] as const) : (["unlimited", "limited"] as const)
      for (const side of order) {
        const sample = await batch(`/${side}`, 500)
        totals[side].wallMs += sample.wallMs
        totals[side].cpuMs += sample.cpuMs
      }
    }
    const requests = rounds * 500
    const row = (name: string, sample: Sample) => ({
      tier,
      "in flight": concurrency,
      route: name,
      "req/s": perSecond(requests / (sample.wallMs / 1000)),
      "µs/request (wall)": Number((sample.wallMs * 1000 / requests).toFixed(1)),
      "µs/request (CPU)": Number((sample.cpuMs * 1000 / requests).toFixed(1)),
      "ratio vs unlimited (wall)": Number((totals.unlimited.wallMs / sample.wallMs).toFixed(2)),
      "ratio vs unlimited (CPU)": Number((totals.unlimited.cpuMs / sample.cpuMs).toFixed(2))
    })
    return [row("rateLimit", totals.limited), row("unlimited", totals.unlimited)]
  } finally {
    await dispose()
  }
}

/** A scratch database for the PostgreSQL run, or `undefined` when PostgreSQL is not reachable. */
const scratchDatabase = async () => await pgReachable() ? await scratch("rl") : undefined

export const run = async () => {
  const memory = () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
  const rows = [...await measure("memory", memory(), 40, 1), ...await measure("memory", memory(), 40, 20)]
  const database = await scratchDatabase()
  if (database === undefined) {
    console.log(`rate-limit bench: PostgreSQL not reachable at ${pgUrl}; PostgreSQL rows skipped`)
  } else {
    try {
      const sql = () =>
        Store.layerSql.pipe(
          Layer.provideMerge(ChangeTap.layerLocal),
          Layer.provideMerge(PgClient.layer({ url: Redacted.make(database.url) }))
        )
      rows.push(...await measure("postgresql", sql(), 10, 1), ...await measure("postgresql", sql(), 10, 20))
    } finally {
      await database.drop()
    }
  }
  table("GET route with rateLimit vs the same route without, in process (alternating batches of 500)", rows)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
