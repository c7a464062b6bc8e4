import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema, TestClock } from "effect"
import { defineApp } from "../../src/app/App.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/SchemaDiffer.js"
import * as Store from "../../src/kernel/Store.js"
import { bearer, Notes, tokenStrategy } from "../app/fixtures.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"

/** An app whose POST /orders counts its handler runs. */
const makeApp = () => {
  let runs = 0
  const placeOrder = defineRestRoute({
    method: "POST",
    path: "/orders",
    input: Schema.Struct({ body: Schema.Struct({ item: Schema.String }) }),
    output: Schema.Struct({ run: Schema.Number, item: Schema.String }),
    handler: ({ body }) =>
      Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(
        Effect.as({ run: ++runs, item: body.item })
      )
  })
  const app = defineApp({ name: "orders", tables: [Notes], restRoutes: [placeOrder], auth: [tokenStrategy], idempotency: { ttlMs: 60_000 } })
  return { app, runs: () => runs }
}

const post = (url: string, key: string, body: unknown, headers: Record<string, string> = bearer("tok-alice")) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/orders`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key, ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
    return { status: response.status, replayed: response.headers.get("idempotency-replayed"), body: await response.text() }
  })

const tier = (client: Layer.Layer<SqlClient.SqlClient, unknown> | null, tables: Parameters<typeof SchemaDiffer.apply>[0]) =>
  client === null
    ? Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
    : Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables)).pipe(Layer.provideMerge(client)))
    )

const suite = (name: string, client: () => Layer.Layer<SqlClient.SqlClient, unknown> | null) =>
  describe(`idempotency: ${name}`, () => {
    it.scoped("200 concurrent requests with one key run the handler once; the rest get 409 or the replay", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.now())
        const { app, runs } = makeApp()
        const served = yield* Serve.serve(app, tier(client(), app.tables))
        const answers = yield* Effect.all(Array.from({ length: 200 }, () => post(served.url, "k-1", { item: "book" })), {
          concurrency: "unbounded"
        })
        assert.strictEqual(runs(), 1)
        const firsts = answers.filter((a) => a.status === 200 && a.replayed === null)
        assert.strictEqual(firsts.length, 1)
        assert.isTrue(answers.every((a) => a.status === 409 || (a.status === 200 && a.body === firsts[0]!.body)))
        const replay = yield* post(served.url, "k-1", { item: "book" })
        assert.deepStrictEqual([replay.status, replay.replayed, replay.body], [200, "true", firsts[0]!.body])
        // Same key, another body: 422. Another tenant: its own scope.
        assert.strictEqual((yield* post(served.url, "k-1", { item: "pen" })).status, 422)
        const otherTenant = yield* post(served.url, "k-1", { item: "book" }, bearer("tok-bob"))
        assert.deepStrictEqual([otherTenant.status, otherTenant.replayed, runs()], [200, null, 2])
        // A request failing decode does not consume its key.
        assert.strictEqual((yield* post(served.url, "k-2", { nope: 1 })).status, 400)
        assert.deepStrictEqual([(yield* post(served.url, "k-2", { item: "cup" })).replayed, runs()], [null, 3])
        // After the TTL the key runs again.
        yield* TestClock.adjust("61 seconds")
        const again = yield* post(served.url, "k-1", { item: "book" })
        assert.deepStrictEqual([again.status, again.replayed, runs()], [200, null, 4])
      }))
  })

suite("memory", () => null)
suite("sqlite", () => SqliteClient.layer({ filename: ":memory:" }))
if (Pg.serverUrl !== null) {
  suite("postgresql", () => Pg.layerFreshClient)
  it.scoped("two app instances sharing PostgreSQL agree on one key", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const url = yield* Pg.freshDatabase
      const one = makeApp()
      const two = makeApp()
      const a = yield* Serve.serve(one.app, tier(Pg.layerClient(url), one.app.tables))
      const b = yield* Serve.serve(two.app, tier(Pg.layerClient(url), two.app.tables))
      const answers = yield* Effect.all(
        Array.from({ length: 100 }, (_, i) => post(i % 2 === 0 ? a.url : b.url, "shared", { item: "x" })),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(one.runs() + two.runs(), 1)
      assert.isTrue(answers.every((r) => r.status === 200 || r.status === 409))
    }))
} else {
  describe("idempotency: postgresql", () => it("is skipped", () => console.warn(Pg.skipReason)))
}

describe("idempotency at mount", () => {
  it.scopedLive("a streaming mutating route on an idempotent app is refused when mounting", () =>
    Effect.gen(function*() {
      const streaming = defineRestRoute({
        method: "POST",
        path: "/feed",
        streaming: true,
        input: Schema.Struct({}),
        output: Schema.Void,
        handler: () => Effect.void
      })
      const app = defineApp({ restRoutes: [streaming], idempotency: true })
      const exit = yield* Effect.exit(Serve.serve(app, tier(null, app.tables)))
      assert.strictEqual(exit._tag, "Failure")
      assert.include(JSON.stringify(exit), "cannot be idempotent")
    }))
})
