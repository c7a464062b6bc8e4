import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import * as MemoryDriver from "../../src/kernel/drivers/memory/MemoryDriver.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as RecordingTap from "./support/RecordingTap.js"

const Notes = defineTable("notes", { fields: { text: Schema.String } })

const fleetTiers = {
  memory: Store.layerMemory.pipe(Layer.provideMerge(RecordingTap.layer({ scope: "fleet" }))),
  sqlite: Store.layerSql.pipe(
    Layer.provideMerge(RecordingTap.layer({ scope: "fleet" })),
    Layer.provide(Layer.effectDiscard(SchemaDiffer.apply([Notes])).pipe(
      Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" }))
    ))
  )
}

for (const [name, tier] of Object.entries(fleetTiers)) {
  describe(`store runtime under a fleet-scoped tap: ${name}`, () => {
    it.effect("a single write stages inside its own transaction: a failing stage leaves nothing written", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const recorder = yield* RecordingTap.RecordingTap
        recorder.failNextStage = true
        const error = yield* Effect.flip(store.insert(Notes, { id: "n1", text: "x" }))
        assert.strictEqual(error._tag, "StoreUnavailable")
        assert.isTrue(Option.isNone(yield* store.get(Notes, "n1")))
        assert.deepStrictEqual(recorder.calls.map((call) => call.kind), ["stage"])
        yield* store.insert(Notes, { id: "n1", text: "x" })
        assert.deepStrictEqual(recorder.calls.map((call) => call.kind), ["stage", "stage", "publish"])
      }).pipe(Effect.provide(tier)))
  })
}

describe("Store.make over a custom driver", () => {
  it.effect("wraps any Driver with encoding, scoping and change events", () =>
    Effect.gen(function*() {
      const store = yield* Store.make(yield* MemoryDriver.make)
      const row = yield* store.insert(Notes, { text: "custom" })
      assert.strictEqual(Option.getOrThrow(yield* store.get(Notes, row.id)).text, "custom")
      assert.strictEqual(store.dialect, "memory")
    }).pipe(Effect.provide(RecordingTap.layer())))
})
