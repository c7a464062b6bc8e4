/**
 * `useExpectation` in a live query of a served app: the first run finds the registries through the
 * standing plugin's interceptor, and so must the shared re-runs that follow each write (one handler
 * run for every identical subscription), or the page showing the status would see `null` after
 * its first push.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Schema, Stream } from "effect"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineExpectation, standingPlugin, useExpectation } from "../../src/standing/index.js"
import * as Serve from "../support/Serve.js"

const Items = defineTable("items", { fields: { name: Schema.String } })
const fewItems = defineExpectation({ name: "few-items", on: { table: Items }, invariant: { kind: "rowCount", max: 1 } })

// Counting the items reads the table, so each write of it re-runs the live query.
const status = query("items.status", {
  input: Schema.Struct({}),
  output: Schema.Struct({ status: Schema.NullOr(Schema.String), items: Schema.Number }),
  handler: (_, { store }) =>
    Effect.all({ status: Effect.map(useExpectation(fewItems), (observed) => observed?.status ?? null), items: store.count(Items) })
})
const add = mutation("items.add", {
  input: Schema.Struct({}),
  output: Schema.Struct({}),
  handler: (_, { store }) => Effect.as(store.insert(Items, { name: "one" }), {})
})

describe("useExpectation in a live query", () => {
  it.scopedLive("every push, the re-runs' included, carries the expectation's status", () =>
    Effect.gen(function*() {
      const app = defineApp({ name: "standing-live", tables: [Items], procedures: [status, add], plugins: [standingPlugin({ expectations: [fewItems] })] })
      const served = yield* Serve.serve(app, Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal)))
      const client = yield* Serve.httpClient(served, app)
      const socket = yield* Serve.wsClient(served, app)
      const pull = yield* Stream.toPull(socket.live(status, {}))
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [{ status: "holding", items: 0 }])
      yield* client.call(add, {})
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [{ status: "holding", items: 1 }])
      yield* client.call(add, {})
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [{ status: "violated", items: 2 }])
    }))
})
