/**
 * A committed write's changes reach the listeners even when its caller is interrupted while they
 * are being delivered (a request timeout, a client that went away).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Schema } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

const Docs = defineTable("docs", { fields: { title: Schema.String } })

describe("publishing after commit", () => {
  it.live("a caller interrupted after COMMIT does not cost the listeners its change; callers do not wait for listeners", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const tap = yield* ChangeTap.ChangeTap
      yield* tap.subscribe({
        name: "slow",
        onEvent: (event) => Effect.sleep("150 millis").pipe(Effect.andThen(() => void seen.push(String(event.after?.title))))
      })
      const store = yield* Store.Store
      const row = yield* store.insert(Docs, { title: "v1" })
      // The slow listener is busy: writers answer without waiting for it.
      yield* store.update(Docs, row.id, { title: "v2" })
      // A caller interrupted right after its write: the committed change still reaches the listener.
      const writer = yield* Effect.fork(store.update(Docs, row.id, { title: "v3" }))
      yield* Fiber.interrupt(writer)
      yield* tap.settled
      const final = Option.map(yield* store.get(Docs, row.id), (doc) => doc.title)
      assert.deepStrictEqual(seen, Option.getOrThrow(final) === "v3" ? ["v1", "v2", "v3"] : ["v1", "v2"])
    }).pipe(Effect.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))), Effect.scoped))
})
