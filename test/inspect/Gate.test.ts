/**
 * The inspect gate (spec 5.4 rule 4): the bearer of `FW_INSPECT_TOKEN` holds every capability; a
 * Subject resolved by the app's own strategies gets in only with the `fw:inspect` scope, and each
 * action needs its capability as a further scope, enforced on the server for every inspect route,
 * relative (`/_fw/inspect/plugins/<name>/…`) or absolute (`/_fw/inspect/aggregates/<name>/refresh`).
 */
import { HttpServerResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { definePlugin } from "../../src/app/Plugin.js"
import { query } from "../../src/app/Procedure.js"
import { aggregatesPlugin } from "../../src/aggregates/index.js"
import { flagsPlugin } from "../../src/flags/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Serve from "../support/Serve.js"
import * as TokenStrategy from "../support/TokenStrategy.js"

const inspectToken = "gate-inspect-token"

const users: Record<string, Subject.Subject> = {
  "tok-ops": Subject.make({ type: "user", id: "ops", tenantId: "acme", scopes: ["fw:inspect", "canToggleFlag", "canRefreshAggregate", "canInvokeProcedure"] }),
  "tok-viewer": Subject.make({ type: "user", id: "viewer", tenantId: "acme", scopes: ["fw:inspect"] }),
  "tok-user": Subject.make({ type: "user", id: "user", tenantId: "acme", scopes: ["todos:write"] })
}

const strategy = TokenStrategy.make("gate-test", users)

const demo = definePlugin({
  name: "demo",
  permissions: ["inspect:read", "inspect:write"],
  inspectRoutes: [
    { method: "GET", path: "/stats", handler: Effect.succeed(HttpServerResponse.unsafeJson({ ok: true })) },
    { method: "POST", path: "/purge", capability: "canPurgeDemo", handler: Effect.succeed(HttpServerResponse.unsafeJson({ purged: true })) },
    { method: "POST", path: "/_fw/inspect/demo/absolute", capability: "canPurgeDemo", handler: Effect.succeed(HttpServerResponse.unsafeJson({ purged: true })) }
  ]
})

const ping = query("gate.ping", { input: Schema.Struct({}), output: Schema.String, handler: () => Effect.succeed("pong") })

const app = defineApp({
  name: "gate-test",
  tables: [],
  procedures: [ping],
  auth: strategy,
  plugins: [demo, flagsPlugin({ flags: { beta: false } }), aggregatesPlugin().plugin]
})

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const call = (url: string, method: string, path: string, token: string | undefined, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, body: text ? JSON.parse(text) as Record<string, unknown> : {} }
  })

const withToken = (value: string | undefined) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const before = process.env.FW_INSPECT_TOKEN
      if (value === undefined) delete process.env.FW_INSPECT_TOKEN
      else process.env.FW_INSPECT_TOKEN = value
      return before
    }),
    (before) => Effect.sync(() => {
      if (before === undefined) delete process.env.FW_INSPECT_TOKEN
      else process.env.FW_INSPECT_TOKEN = before
    })
  )

describe("the inspect gate", () => {
  it.scopedLive("admits the token with every capability, and a Subject with fw:inspect with its own", () =>
    Effect.gen(function*() {
      yield* withToken(inspectToken)
      const { url } = yield* Serve.serve(app, memory)
      // Who gets in at all.
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/procedures", undefined)).status, 401)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/procedures", "wrong")).status, 401)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/procedures", "tok-user")).status, 403)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/procedures", "tok-viewer")).status, 200)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/procedures", inspectToken)).status, 200)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/plugins/demo/stats", "tok-user")).status, 403)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/plugins/demo/stats", "tok-viewer")).status, 200)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/aggregates", "tok-viewer")).status, 503, "read, reached the handler")

      // What each operator may do.
      const operator = yield* call(url, "GET", "/_fw/inspect/operator", "tok-viewer")
      assert.deepStrictEqual(operator.body, {
        via: "subject",
        subject: { type: "user", id: "viewer", tenantId: "acme" },
        capabilities: {
          canInvokeProcedure: false,
          canReindexSearch: false,
          canResyncSearch: false,
          canToggleFlag: false,
          canRefreshAggregate: false,
          canPurgeDemo: false
        }
      })
      const full = yield* call(url, "GET", "/_fw/inspect/operator", inspectToken)
      assert.strictEqual(full.body.via, "token")
      assert.isTrue(Object.values(full.body.capabilities as Record<string, boolean>).every((held) => held))
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/operator", "tok-ops")).body.via, "subject")

      // Capabilities, enforced on the server before the handler, on relative and absolute paths.
      const refusals: Array<[string, string, unknown]> = [
        ["POST", "/_fw/inspect/invoke", { tag: "gate.ping" }],
        ["POST", "/_fw/inspect/plugins/flags/toggle", { flag: "beta", actor: "viewer" }],
        ["POST", "/_fw/inspect/aggregates/daily/refresh", undefined],
        ["POST", "/_fw/inspect/plugins/demo/purge", undefined],
        ["POST", "/_fw/inspect/demo/absolute", undefined]
      ]
      for (const [method, path, body] of refusals) {
        const refused = yield* call(url, method, path, "tok-viewer", body)
        assert.strictEqual(refused.status, 403, path)
        assert.strictEqual(refused.body._tag, "Forbidden", path)
        assert.notStrictEqual((yield* call(url, method, path, inspectToken, body)).status, 403, `${path} with the token`)
      }
      assert.strictEqual((yield* call(url, "POST", "/_fw/inspect/plugins/flags/toggle", "tok-ops", { flag: "beta", actor: "ops" })).status, 200)
      assert.strictEqual((yield* call(url, "POST", "/_fw/inspect/invoke", "tok-ops", { tag: "gate.ping" })).body.result, "pong")
      assert.strictEqual((yield* call(url, "POST", "/_fw/inspect/aggregates/daily/refresh", "tok-ops")).status, 503, "allowed, reached the handler")
      assert.strictEqual((yield* call(url, "POST", "/_fw/inspect/plugins/demo/purge", "tok-ops")).status, 403, "a plugin's own capability")
      const flags = yield* call(url, "GET", "/_fw/inspect/plugins/flags/list", "tok-viewer")
      assert.strictEqual(flags.status, 200)
    }))

  it.scopedLive("without FW_INSPECT_TOKEN the surface is absent for everyone but a Subject with fw:inspect", () =>
    Effect.gen(function*() {
      yield* withToken(undefined)
      const { url } = yield* Serve.serve(app, memory)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/procedures", undefined)).status, 404)
      assert.strictEqual((yield* call(url, "GET", "/_fw/dashboard", undefined)).status, 404)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/procedures", inspectToken)).status, 401, "no token is configured")
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/procedures", "tok-user")).status, 403)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/procedures", "tok-viewer")).status, 200)
      assert.strictEqual((yield* call(url, "GET", "/_fw/inspect/operator", "tok-ops")).status, 200)
    }))
})
