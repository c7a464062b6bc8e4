/**
 * Inspect routes (spec 4.1) over a served app: the aggregates snapshot and a manual refresh, behind
 * the inspect token, at the spec's paths (`/_fw/inspect/aggregates`), not under the plugin prefix.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { aggregatesPlugin, defineAggregate, layerMemory } from "../../src/aggregates/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"

process.env.FW_INSPECT_TOKEN = "inspect-secret"

const request = (method: "GET" | "POST", url: string, token = "inspect-secret") =>
  Effect.promise(async () => {
    const response = await fetch(url, { method, headers: { authorization: `Bearer ${token}` } })
    const text = await response.text()
    return { status: response.status, body: (text === "" ? {} : JSON.parse(text)) as Record<string, unknown> }
  })

describe("aggregates inspect routes", () => {
  it.scopedLive("GET lists every aggregate with its meta; POST <name>/refresh refreshes it; unknown names are 404; the token is required", () =>
    Effect.gen(function*() {
      const ctx = yield* Layer.build(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal)))
      let n = 0
      const agg = defineAggregate({
        name: "counter",
        refresh: { cron: "0 3 * * *", timezone: "Europe/Berlin" },
        output: Schema.Struct({ n: Schema.Number }),
        build: () => [{ n: ++n }],
        bootRefresh: "sync"
      })
      const inspect = aggregatesPlugin()
      yield* Layer.build(inspect.attach.pipe(Layer.provideMerge(layerMemory([agg])), Layer.provide(Layer.succeedContext(ctx))))
      const app = defineApp({ name: "aggregates-inspect", plugins: [inspect.plugin] })
      const served = yield* Serve.serve(app, Layer.succeedContext(ctx))
      const base = `${served.url}/_fw/inspect/aggregates`

      const listed = yield* request("GET", base)
      assert.strictEqual(listed.status, 200)
      const [entry] = listed.body.aggregates as ReadonlyArray<Record<string, unknown>>
      assert.strictEqual(entry?.name, "counter")
      assert.deepStrictEqual(entry?.refresh, { cron: "0 3 * * *", timezone: "Europe/Berlin" })
      assert.strictEqual((entry?.meta as Record<string, unknown>).rowCount, 1)

      const refreshed = yield* request("POST", `${base}/counter/refresh`)
      assert.strictEqual(refreshed.status, 200)
      assert.strictEqual(refreshed.body.outcome, "refreshed")
      assert.strictEqual(n, 2)
      assert.strictEqual((yield* request("POST", `${base}/nope/refresh`)).status, 404)
      assert.strictEqual((yield* request("GET", base, "wrong")).status, 401)
      assert.strictEqual((yield* request("POST", `${base}/counter/refresh`, "wrong")).status, 401)
      assert.strictEqual(n, 2)
      // Only at the spec's paths: nothing under the generic plugin prefix.
      assert.strictEqual((yield* request("GET", `${served.url}/_fw/inspect/plugins/aggregates/`)).status, 404)
    }))
})
