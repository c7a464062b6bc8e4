/**
 * A committed write's changes reach the listeners even when its caller is interrupted while they
 * are being delivered (a request timeout, a client that went away).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Schema } from "effect"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import { defineTable } from "../../src/kernel/Table.js"

const Docs = defineTable("docs", { fields: { title: Schema.String } })

describe("publishing after commit", () => {
  it.live("a caller interrupted after COMMIT does not cost the listeners its change", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const tap = yield* ChangeTap.ChangeTap
      yield* tap.subscribe({
        name: "slow",
        onEvent: (event) => Effect.sleep("150 millis").pipe(Effect.andThen(() => void seen.push(String(event.after?.title))))
      })
      const store = yield* Store.Store
      const row = yield* store.insert(Docs, { title: "v1" })
      // Writer 1 occupies delivery; writer 2 commits, then its caller gives up while it waits.
      const first = yield* Effect.fork(store.update(Docs, row.id, { title: "v2" }))
      yield* Effect.sleep("30 millis")
      const second = yield* Effect.either(store.update(Docs, row.id, { title: "v3" }).pipe(Effect.timeout("50 millis")))
      assert.strictEqual(second._tag, "Left")
      yield* Fiber.join(first)
      yield* Effect.sleep("400 millis")
      assert.deepStrictEqual(seen, ["v1", "v2", "v3"])
      assert.deepStrictEqual(Option.map(yield* store.get(Docs, row.id), (doc) => doc.title), Option.some("v3"))
    }).pipe(Effect.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))), Effect.scoped))
})
