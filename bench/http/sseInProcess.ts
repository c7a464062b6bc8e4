/**
 * The server's own work per commit of an SSE fan-out, without sockets: 1,000 projected answers of
 * one live query in one process, each read as fw's Node writer reads it (`Sse.pullOf`: a plain
 * loop over `next`, and frames made synchronously handed to a sink at once) into a counter instead
 * of a socket. Prints CPU time per commit. `SSE_SYNC=0` leaves the sink out (every frame through
 * the member's fiber): run both for the same-machine comparison.
 *
 * `npx tsx bench/http/sseInProcess.ts` (`SSE_COMMITS=n`, default 200; `SSE_SUBSCRIBERS=n`, default 1,000)
 */
import { FetchHttpClient, Headers } from "@effect/platform"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import * as Runtime from "../../src/app/Runtime.js"
import * as LiveQuery from "../../src/http/LiveQuery.js"
import * as Sse from "../../src/http/Sse.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

const SUBSCRIBERS = Number(process.env["SSE_SUBSCRIBERS"] ?? 1_000)
const COMMITS = Number(process.env["SSE_COMMITS"] ?? 200)
const Ticks = defineTable("ticks", { fields: { n: Schema.Number } })
const latest = query("ticks.latest", {
  input: Schema.Struct({}),
  output: Schema.Number,
  handler: (_, { store }) => Effect.map(store.find(Ticks, { orderBy: "n", direction: "desc", limit: 1 }), (rows) => rows[0]?.n ?? 0)
})
const app = defineApp({ name: "sse-in-process", tables: [Ticks], procedures: [latest] })

const program = Effect.gen(function*() {
  const runtime = yield* Runtime.Runtime
  const store = yield* Store.Store
  let frames = 0
  const scope = yield* Scope.make()
  for (let i = 0; i < SUBSCRIBERS; i++) {
    const response = yield* Scope.extend(LiveQuery.answer(runtime, latest, { input: {}, headers: Headers.empty }, Effect.void), scope)
    if (response.body._tag !== "Stream") throw new Error("not a stream")
    const open = Sse.pullOf(response.body.stream)
    if (open === undefined) throw new Error("not a pulled body")
    yield* Effect.forkIn(Effect.scoped(Effect.flatMap(open, ({ listen, next }) => {
      if (process.env["SSE_SYNC"] !== "0") listen({ ready: () => true, take: () => void (frames += 1) })
      const loop: Effect.Effect<void> = Effect.flatMap(next, (frame) => {
        if (frame === undefined) return Effect.void
        frames += 1
        return loop
      })
      return loop
    })), scope)
  }
  const waitFor = (n: number) => Effect.gen(function*() {
    while (frames < n) yield* Effect.sleep(1)
  })
  yield* waitFor(2 * SUBSCRIBERS)
  console.log("open")
  const commit = (n: number) => Effect.zipRight(store.insert(Ticks, { n }).pipe(Subject.asSystem), waitFor((n + 2) * SUBSCRIBERS))
  for (let n = 1; n <= 20; n++) yield* commit(n)
  const before = process.cpuUsage()
  const started = performance.now()
  for (let n = 21; n <= 20 + COMMITS; n++) yield* commit(n)
  const cpu = process.cpuUsage(before)
  console.log(`${SUBSCRIBERS} subscribers, ${COMMITS} commits: ${((cpu.user + cpu.system) / 1000 / COMMITS).toFixed(2)} ms CPU per commit, ${((performance.now() - started) / COMMITS).toFixed(2)} ms wall per commit`)
  yield* Scope.close(scope, Exit.void)
})

await Effect.runPromise(program.pipe(
  Effect.provide(Runtime.layer(app).pipe(
    Layer.provideMerge(Store.layerMemory),
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provide(FetchHttpClient.layer)
  ))
))
process.exit(0)
