/**
 * Two real app processes on one PostgreSQL share one rate limit: a burst spread over both admits
 * exactly `limit` requests in total (each replica counts in the shared `_fw_rate_limits` with one
 * atomic upsert), and every other request is answered 429.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { build } from "esbuild"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { RateLimitCounters } from "../../src/app/tables.js"
import * as SchemaDiffer from "../../src/kernel/SchemaDiffer.js"
import * as Pg from "../support/Pg.js"

if (!Pg.serverUrl) console.warn(Pg.skipReason)

const limit = 25

/** The replica bundled once (packages external), as the fleet harness does. */
const bundle = Effect.promise(() =>
  build({
    entryPoints: [path.join(import.meta.dirname, "rateLimitApp.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    packages: "external",
    outfile: path.join(import.meta.dirname, ".build", "rateLimitApp.mjs"),
    logLevel: "warning"
  }).then(() => path.join(import.meta.dirname, ".build", "rateLimitApp.mjs"))
)

/** Starts a replica on `databaseUrl`; killed when the scope closes. Resolves with its URL. */
const start = (name: string, appPath: string, databaseUrl: string) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [appPath], {
          env: { ...process.env, DATABASE_URL: databaseUrl, FW_REPLICA: name, FW_LIMIT: String(limit) },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
    )
    const port = yield* Effect.async<number, Error>((resume) => {
      let out = ""
      let err = ""
      child.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString()
        const match = /PORT (\d+)/.exec(out)
        if (match !== null) resume(Effect.succeed(Number(match[1])))
      })
      child.stderr!.on("data", (chunk: Buffer) => void (err += chunk.toString()))
      child.on("exit", (code) => resume(Effect.fail(new Error(`replica ${name} exited (${code}): ${err.slice(-2000)} ${out.slice(-2000)}`))))
    }).pipe(Effect.timeout("60 seconds"), Effect.orDie)
    const url = `http://127.0.0.1:${port}`
    // The port is printed when the listener is bound, which can be before the routes are mounted
    // (a request then waits unanswered): poll the health route, each try cut short, until it answers.
    yield* Effect.promise(async () => {
      for (let attempt = 0; attempt < 100; attempt++) {
        const ok = await fetch(`${url}/_fw/health`, { signal: AbortSignal.timeout(500) }).then((r) => r.ok, () => false)
        if (ok) return
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      throw new Error(`replica ${name} never became ready`)
    })
    return url
  })

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
      const appPath = yield* bundle
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
