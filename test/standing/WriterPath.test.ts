/**
 * What the standing plugin costs a writer: a change is counted synchronously when the plugin host
 * calls `onChangeEvent`, and only a change that moves a status (or has an experiment listener to
 * tell) leaves an effect to run on the writer's fiber. The app's own code throwing (a `where`)
 * fails neither the write nor the counting of later writes.
 */
import { FetchHttpClient, HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as PluginServices from "../../src/app/PluginServices.js"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as Store from "../../src/kernel/store/Store.js"
import {
  defineExpectation,
  defineExperiment,
  ExpectationRegistry,
  ExperimentRegistry,
  type StandingPlugin,
  standingPlugin
} from "../../src/standing/index.js"
import { Events, Orders, stack } from "./support.js"

const volume = defineExpectation({ name: "volume", on: { table: Orders }, invariant: { kind: "rowCount", max: 2 } })
const checkout = defineExperiment({
  name: "checkout",
  on: { table: Events },
  subject: "userId",
  variants: [{ name: "a" }, { name: "b" }],
  metric: { kind: "count" }
})

const provenance = (seq: number) => ({ traceId: `trace-${seq}`, subjectId: null, procedure: null })

const orderInserted = (seq: number): ChangeEvent => ({
  seq,
  table: Orders.name,
  op: "insert",
  id: `o${seq}`,
  tenantId: "acme",
  before: null,
  after: { id: `o${seq}`, tenantId: "acme", amount: 5, status: "open", placedAt: 0 },
  at: 1_000 + seq,
  provenance: provenance(seq)
})

const eventInserted = (seq: number, userId: string): ChangeEvent => ({
  seq,
  table: Events.name,
  op: "insert",
  id: `e${seq}`,
  tenantId: null,
  before: null,
  after: { id: `e${seq}`, userId, value: 1, converted: false, arm: null },
  at: 1_000 + seq,
  provenance: provenance(seq)
})

/** Calls the plugin's listener as the plugin host does: with the plugin's services for the store in context. */
const deliver = (plugin: StandingPlugin, event: ChangeEvent) =>
  Effect.gen(function*() {
    const client = yield* Effect.provide(HttpClient.HttpClient, FetchHttpClient.layer)
    return plugin.onChangeEvent!(event, PluginServices.services(plugin, yield* Store.Store, client))
  })

describe("standing on the writer's path", () => {
  it.scoped("counts when called and leaves an effect only for a change that moves a status", () =>
    Effect.gen(function*() {
      const plugin = standingPlugin({ expectations: [volume], experiments: [checkout] })
      const context = yield* Layer.build(stack(null, plugin))
      yield* Effect.gen(function*() {
        const expectations = yield* ExpectationRegistry
        const experiments = yield* ExperimentRegistry
        // The boot counted an empty table: `volume` holds with 0 rows.
        assert.strictEqual((yield* expectations.get("volume"))?.status, "holding")
        assert.strictEqual(yield* deliver(plugin, orderInserted(1)), Effect.void)
        assert.strictEqual(yield* deliver(plugin, orderInserted(2)), Effect.void)
        // Counted when the listener was called, before anything ran.
        assert.strictEqual((yield* expectations.get("volume"))?.metric, 2)
        // A third row breaks `volume` (max 2): recording and notifying the transition is left to run.
        const third = yield* deliver(plugin, orderInserted(3))
        assert.notStrictEqual(third, Effect.void)
        const observed = yield* expectations.get("volume")
        assert.strictEqual(observed?.status, "violated")
        assert.strictEqual(observed?.lastCause?.traceId, "trace-3")
        yield* Effect.provide(third, FetchHttpClient.layer)
        // An experiment row without any listener subscribed: counted, nothing to run.
        assert.strictEqual(yield* deliver(plugin, eventInserted(4, "u1")), Effect.void)
        assert.strictEqual((yield* experiments.get("checkout"))?.totalExposure, 1)
      }).pipe(Effect.provide(context))
    }))

  it.scoped("a `where` that throws fails neither the write nor the counting of later writes", () =>
    Effect.gen(function*() {
      const picky = defineExpectation({
        name: "picky",
        on: {
          table: Orders,
          where: (row) => {
            if (row.status === "poison") throw new Error("the app's where threw")
            return true
          }
        },
        invariant: { kind: "rowCount", max: 10 }
      })
      const context = yield* Layer.build(stack(null, standingPlugin({ expectations: [picky] })))
      yield* Effect.gen(function*() {
        const store = yield* Store.Store
        const order = (id: string, status: string) => ({ id, tenantId: "acme", amount: 1, status, placedAt: 0 })
        yield* store.insert(Orders, order("a", "open"))
        yield* store.insert(Orders, order("b", "poison"))
        yield* store.insert(Orders, order("c", "open"))
        assert.strictEqual((yield* store.find(Orders)).length, 3)
        const registry = yield* ExpectationRegistry
        assert.strictEqual((yield* registry.get("picky"))?.metric, 2)
      }).pipe(Effect.provide(context))
    }))
})
