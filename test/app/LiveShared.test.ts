/**
 * Identical live subscriptions (same procedure, input and subject) share one handler re-run per
 * change, while each subscriber's guards still run before every push: a subscriber whose guard now
 * refuses gets the refusal and its stream ends, the others keep receiving.
 */
import { FetchHttpClient, Headers } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Layer, Option, Schema, Stream } from "effect"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import * as Runtime from "../../src/app/Runtime.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

const Ticks = defineTable("ticks", { fields: { n: Schema.Number } })

/** Handler runs, counted: what the test measures. */
let runs = 0
/** Seats whose guard refuses from now on (every subscriber is the same anonymous subject). */
const revoked = new Set<string>()

const latest = query("ticks.latest", {
  input: Schema.Struct({ above: Schema.Number }),
  output: Schema.Number,
  guards: [(ctx) => revoked.has(ctx.headers["x-seat"] ?? "") ? { status: 403, message: "seat revoked" } : undefined],
  handler: ({ above }, { store }) =>
    Effect.sync(() => void (runs += 1)).pipe(
      Effect.zipRight(store.find(Ticks, { orderBy: "n", direction: "desc", limit: 1 })),
      Effect.map((rows) => Math.max(above, rows[0]?.n ?? 0))
    )
})

const app = defineApp({ name: "live-shared", tables: [Ticks], procedures: [latest] })

const stack = Runtime.layer(app).pipe(
  Layer.provideMerge(Store.layerMemory),
  Layer.provideMerge(ChangeTap.layerLocal),
  Layer.provide(FetchHttpClient.layer)
)

const SUBSCRIBERS = 20

describe("identical live subscriptions", () => {
  it.scopedLive("share one re-run per change; a subscriber whose guard now refuses is ended, the others continue", () =>
    Effect.gen(function*() {
      const runtime = yield* Runtime.Runtime
      const store = yield* Store.Store
      const subscribe = (seat: string, above = 0) =>
        Stream.toPull(runtime.live(latest, { input: { above }, headers: Headers.fromInput({ "x-seat": seat }) }))
      const pulls = yield* Effect.forEach(Array.from({ length: SUBSCRIBERS }, (_, i) => String(i)), (seat) => subscribe(seat))
      // Another input is another subscription: it runs on its own.
      const other = yield* subscribe("other", -1)
      for (const pull of [...pulls, other]) assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [0])

      // Each first run is the subscriber's own; from here on, every change costs one run per group.
      runs = 0
      yield* store.insert(Ticks, { n: 1 }).pipe(Subject.asSystem)
      for (const pull of pulls) assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [1])
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* other), [1])
      assert.strictEqual(runs, 2, "one re-run for the 20 identical subscribers, one for the other input")

      // Seat 0's guard refuses now: its next push is the refusal, and its stream ends.
      revoked.add("0")
      runs = 0
      yield* store.insert(Ticks, { n: 2 }).pipe(Subject.asSystem)
      const refused = yield* Effect.either(pulls[0]!)
      assert.isTrue(Either.isLeft(refused))
      const error = Either.isLeft(refused) ? Option.getOrUndefined(refused.left) : undefined
      assert.strictEqual(error?._tag, "GuardRefused")
      for (const pull of pulls.slice(1)) assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [2])
      assert.strictEqual(runs, 2)

      // The others go on sharing; the refused one holds nothing.
      runs = 0
      yield* store.insert(Ticks, { n: 3 }).pipe(Subject.asSystem)
      for (const pull of pulls.slice(1)) assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [3])
      assert.strictEqual(runs, 2)
    }).pipe(Effect.provide(stack)))

  it.scopedLive("before each push a member's guards run once each, also when a synchronous guard comes before an effectful one", () =>
    Effect.gen(function*() {
      const calls = { sync: 0, effectful: 0 }
      const guarded = query("ticks.guarded", {
        input: Schema.Struct({}),
        output: Schema.Number,
        guards: [
          () => {
            calls.sync += 1
            return undefined
          },
          () => Effect.sync(() => void (calls.effectful += 1))
        ],
        handler: (_, { store }) => Effect.map(store.count(Ticks), (n) => n)
      })
      const guardedApp = defineApp({ name: "live-guards", tables: [Ticks], procedures: [guarded] })
      const layer = Runtime.layer(guardedApp).pipe(
        Layer.provideMerge(Store.layerMemory),
        Layer.provideMerge(ChangeTap.layerLocal),
        Layer.provide(FetchHttpClient.layer)
      )
      yield* Effect.gen(function*() {
        const runtime = yield* Runtime.Runtime
        const store = yield* Store.Store
        const pull = yield* Stream.toPull(runtime.live(guarded, { input: {}, headers: Headers.fromInput({}) }))
        assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [0])
        assert.deepStrictEqual(calls, { sync: 1, effectful: 1 })
        yield* store.insert(Ticks, { n: 1 }).pipe(Subject.asSystem)
        assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [1])
        assert.deepStrictEqual(calls, { sync: 2, effectful: 2 })
      }).pipe(Effect.provide(layer))
    }))
})
