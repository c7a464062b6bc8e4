/**
 * Two real app processes on one PostgreSQL share one rate limit: a burst spread over both admits
 * exactly `limit` requests in total (each replica counts in the shared `_fw_rate_limits` with one
 * atomic upsert), and every other request is answered 429.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { RateLimitCounters } from "../../src/app/tables.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Pg from "../support/Pg.js"
import * as Fleet from "./support.js"

if (!Pg.serverUrl) console.warn(Pg.skipReason)

const limit = 25

/** Starts a replica on `databaseUrl`; killed when the scope closes. Resolves with its URL. */
const start = (name: string, appPath: string, databaseUrl: string) =>
  Effect.map(Fleet.spawnApp(name, appPath, { DATABASE_URL: databaseUrl, FW_LIMIT: String(limit) }), ({ url }) => url)

const post = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/hit`, { method: "POST" })
    await response.arrayBuffer()
    return { status: response.status, remaining: response.headers.get("ratelimit") }
  })

describe.skipIf(Pg.serverUrl === null)("a rate limit shared by replicas (real processes on one PostgreSQL)", () => {
  it.scopedLive(`a burst of 80 requests over two replicas admits exactly ${limit}`, () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      // Created up front, as `fw db apply` would: the replicas race only on counting.
      yield* SchemaDiffer.apply([RateLimitCounters]).pipe(Effect.provide(Pg.layerClient(url)))
      const appPath = yield* Effect.promise(() => Fleet.bundleApp("rateLimitApp.ts"))
      const replicas = yield* Effect.all([start("r0", appPath, url), start("r1", appPath, url)], { concurrency: "unbounded" })
      const replies = yield* Effect.all(
        Array.from({ length: 80 }, (_, i) => post(replicas[i % 2]!)),
        { concurrency: 16 }
      )
      const admitted = replies.filter((reply) => reply.status === 200)
      const refused = replies.filter((reply) => reply.status === 429)
      assert.strictEqual(admitted.length, limit, `admitted ${admitted.length} of 80 (limit ${limit})`)
      assert.strictEqual(refused.length, 80 - limit)
      // Both replicas admitted some: the count really was shared, not one replica doing all the work.
      for (const parity of [0, 1]) {
        assert.isAbove(replies.filter((reply, i) => i % 2 === parity && reply.status === 200).length, 0, `replica r${parity} admitted none`)
      }
      const remaining = admitted.map((reply) => Number(/r=(\d+)/.exec(reply.remaining ?? "")?.[1])).sort((a, b) => a - b)
      assert.deepStrictEqual(remaining, Array.from({ length: limit }, (_, i) => i), "each admitted request saw its own count")
    }), 120_000)
})
