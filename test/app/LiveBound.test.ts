/**
 * A live query whose subscriber does not take its pushes (a client that never acknowledges) holds
 * no growing queue of change events: changes only mark its result stale, and the next push it
 * takes is the current result.
 */
import { FetchHttpClient, Headers } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Option, Queue, Stream } from "effect"
import * as Runtime from "../../src/app/Runtime.js"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { app, bearer, listNotes, Notes } from "./fixtures.js"

/** The local tap, handing out subscriptions the test can measure. */
const subscriptions: Array<Queue.Dequeue<ChangeEvent>> = []
const measuredTap = Layer.effect(
  ChangeTap.ChangeTap,
  Effect.map(ChangeTap.ChangeTap, (tap) => ({
    ...tap,
    events: Effect.tap(tap.events, (queue) => Effect.sync(() => void subscriptions.push(queue)))
  }))
).pipe(Layer.provide(ChangeTap.layerLocal))

const stack = Runtime.layer(app).pipe(
  Layer.provideMerge(Store.layerMemory),
  Layer.provideMerge(measuredTap),
  Layer.provide(FetchHttpClient.layer)
)

describe("a live subscriber that does not take its pushes", () => {
  it.scopedLive("holds no queue of change events: 500 writes leave nothing queued, and the next push is current", () =>
    Effect.gen(function*() {
      const runtime = yield* Runtime.Runtime
      const store = yield* Store.Store
      const pull = yield* Stream.toPull(runtime.live(listNotes, { input: {}, headers: Headers.fromInput(bearer("tok-alice")) }))
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [[]])
      const subscription = subscriptions[subscriptions.length - 1]!
      yield* Effect.forEach(
        Array.from({ length: 500 }, (_, i) => i),
        (i) => store.insert(Notes, { tenantId: "acme", text: `n${i}`, rank: i }),
        { discard: true }
      ).pipe(Subject.asSystem)
      // Nobody pulls the stream; the changes must not wait in its subscription.
      let queued = yield* Queue.size(subscription)
      for (let i = 0; i < 200 && queued > 0; i++) {
        yield* Effect.sleep("5 millis")
        queued = yield* Queue.size(subscription)
      }
      assert.strictEqual(queued, 0, "change events queued for a subscriber that takes nothing")
      const pushed = yield* pull
      const rows = Option.getOrThrow(Chunk.head(pushed)) as ReadonlyArray<{ text: string }>
      assert.strictEqual(rows.length, 500)
    }).pipe(Effect.provide(stack)))
})
