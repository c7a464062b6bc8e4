/**
 * Promises of spec 2.8 and 4.5 that each need a test of their own: HEAD, DELETE and OPTIONS as
 * declared routes; `summary` reaching the OpenAPI operation; `etag` ignored off GET; `ctx.headers`
 * read by a guard and a handler; a handler failing with `Unauthenticated` answered 401 with its
 * reason.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { Unauthenticated } from "../../src/app/Errors.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { jsonBody, send } from "./client.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
const ran: Array<string> = []

const Item = Schema.Struct({ id: Schema.String, deleted: Schema.Boolean })

const removeItem = defineRestRoute({
  method: "DELETE",
  path: "/items/:id",
  summary: "Delete one item",
  input: Schema.Struct({ params: Schema.Struct({ id: Schema.String }) }),
  output: Item,
  handler: ({ params }) => Effect.sync(() => (ran.push(`DELETE ${params.id}`), { id: params.id, deleted: true }))
})

const itemOptions = defineRestRoute({
  method: "OPTIONS",
  path: "/items/:id",
  output: Schema.Struct({ methods: Schema.Array(Schema.String) }),
  handler: () => Effect.sync(() => (ran.push("OPTIONS"), { methods: ["DELETE", "OPTIONS"] }))
})

const probe = defineRestRoute({
  method: "HEAD",
  path: "/probe",
  output: Schema.Struct({ ok: Schema.Boolean }),
  handler: (_, ctx) =>
    Effect.gen(function*() {
      ran.push("HEAD")
      yield* ctx.response.setHeader("x-probe", "alive")
      return { ok: true }
    })
})

const tagged = defineRestRoute({
  method: "GET",
  path: "/tagged",
  summary: "Read the tagged value",
  etag: true,
  output: Schema.Struct({ value: Schema.Number }),
  handler: () => Effect.succeed({ value: 1 })
})

const etagOn = (method: "POST" | "PUT") =>
  defineRestRoute({
    method,
    path: "/tagged",
    etag: true,
    output: Schema.Struct({ value: Schema.Number }),
    handler: () => Effect.succeed({ value: 1 })
  })

/** A guard and a handler that read request headers from `ctx.headers`. */
const planned = defineRestRoute({
  method: "GET",
  path: "/plan",
  output: Schema.Struct({ plan: Schema.String, agent: Schema.String }),
  guards: [(ctx) => ctx.headers["x-plan"] === "pro" ? undefined : { status: 402, message: "the pro plan is required" }],
  handler: (_, ctx) => Effect.succeed({ plan: ctx.headers["x-plan"] ?? "", agent: ctx.headers["user-agent"] ?? "" })
})

const expired = defineRestRoute({
  method: "GET",
  path: "/session-bound",
  output: Schema.Struct({}),
  handler: () => Effect.fail(new Unauthenticated({ reason: "the upstream session has expired" }))
})

const app = defineApp({
  name: "declared",
  restRoutes: [removeItem, itemOptions, probe, tagged, etagOn("POST"), etagOn("PUT"), planned, expired]
})

describe("declared REST routes (spec 2.8)", () => {
  it.scopedLive("HEAD, DELETE and OPTIONS are routes of their own, run through the pipeline", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      ran.length = 0
      const deleted = yield* send(`${url}/items/a1`, { method: "DELETE" })
      assert.strictEqual(deleted.status, 200)
      assert.deepStrictEqual(deleted.json(), { id: "a1", deleted: true })
      const options = yield* send(`${url}/items/a1`, { method: "OPTIONS" })
      assert.strictEqual(options.status, 200)
      assert.deepStrictEqual(options.json(), { methods: ["DELETE", "OPTIONS"] })
      const head = yield* send(`${url}/probe`, { method: "HEAD" })
      assert.strictEqual(head.status, 200)
      assert.strictEqual(head.headers.get("x-probe"), "alive")
      assert.strictEqual(head.text, "")
      assert.deepStrictEqual(ran, ["DELETE a1", "OPTIONS", "HEAD"])
      // The method gate lists them as mounted.
      const other = yield* send(`${url}/items/a1`, jsonBody("PUT", {}))
      assert.strictEqual(other.status, 405)
      assert.strictEqual(other.headers.get("allow"), "DELETE, OPTIONS")
      const probeGet = yield* send(`${url}/probe`)
      assert.strictEqual(probeGet.status, 405)
      assert.strictEqual(probeGet.headers.get("allow"), "HEAD")
    }))

  it.scopedLive("summary becomes the summary of the route's OpenAPI operation (the method and path when none is declared)", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      const document = (yield* send(`${url}/openapi.json`)).json() as {
        readonly paths: Record<string, Record<string, { readonly summary?: string }>>
      }
      assert.strictEqual(document.paths["/items/{id}"]?.["delete"]?.summary, "Delete one item")
      assert.strictEqual(document.paths["/tagged"]?.["get"]?.summary, "Read the tagged value")
      assert.strictEqual(document.paths["/tagged"]?.["post"]?.summary, "POST /tagged")
    }))

  it.scopedLive("etag is honoured on GET and ignored on POST and PUT", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      const got = yield* send(`${url}/tagged`)
      const etag = got.headers.get("etag")
      assert.match(etag ?? "", /^W\/"[0-9a-f]{40}"$/)
      assert.strictEqual((yield* send(`${url}/tagged`, { headers: { "if-none-match": etag! } })).status, 304)
      for (const method of ["POST", "PUT"]) {
        const answer = yield* send(`${url}/tagged`, jsonBody(method, {}, { "if-none-match": etag! }))
        assert.strictEqual(answer.status, 200, method)
        assert.isNull(answer.headers.get("etag"), method)
        assert.deepStrictEqual(answer.json(), { value: 1 })
      }
    }))

  it.scopedLive("a guard and a handler read the request headers from ctx.headers", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      const refused = yield* send(`${url}/plan`, { headers: { "x-plan": "free" } })
      assert.strictEqual(refused.status, 402)
      assert.strictEqual((refused.json() as { message: string }).message, "the pro plan is required")
      const allowed = yield* send(`${url}/plan`, { headers: { "x-plan": "pro", "user-agent": "declared-test/1" } })
      assert.strictEqual(allowed.status, 200)
      assert.deepStrictEqual(allowed.json(), { plan: "pro", agent: "declared-test/1" })
    }))

  it.scopedLive("a handler failing with Unauthenticated answers 401 with its reason", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      const answer = yield* send(`${url}/session-bound`)
      assert.strictEqual(answer.status, 401)
      const body = answer.json() as { readonly _tag: string; readonly reason?: string; readonly message: string }
      assert.strictEqual(body._tag, "Unauthenticated")
      assert.include(JSON.stringify(body), "the upstream session has expired")
    }))
})
