/**
 * The flags plugin served over real sockets: gating on WebSocket rpc, POST /rpc and REST
 * projections with `FlagDisabled` decoded by the typed client, `requireFlag`, the live
 * `flags.evaluate` query pushing a toggle (memory and SQLite), the audit row naming a signed-in
 * operator (SQLite and PostgreSQL), the inspect routes and the permissions it asks for.
 */
import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Queue, Stream } from "effect"
import { defineApp } from "../../src/app/App.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as Client from "../../src/client/Client.js"
import { evaluateTag, flagsEvaluate, flagsPlugin, isFlagEnabled, requireFlag } from "../../src/flags/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"
import * as TokenStrategy from "../support/TokenStrategy.js"
import { tokenStrategy } from "../app/fixtures.js"
import { bearer, check, echo, makeApp, pay, plugin, purge, ran, report } from "./fixtures.js"

process.env.FW_INSPECT_TOKEN = "inspect-secret"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
const sqlite = Store.layerSql.pipe(
  Layer.provideMerge(ChangeTap.layerLocal),
  Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })),
  Layer.orDie
)

const alice = bearer("tok-alice") // tenant acme
const bob = bearer("tok-bob") // tenant globex

const http = (served: Serve.Served, method: "GET" | "POST", path: string, body?: unknown, token?: string) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    let request = method === "GET" ? HttpClientRequest.get(`${served.url}${path}`) : HttpClientRequest.post(`${served.url}${path}`)
    if (body !== undefined) request = HttpClientRequest.bodyUnsafeJson(request, body)
    if (token !== undefined) request = HttpClientRequest.bearerToken(request, token)
    const response = yield* client.execute(request)
    return { status: response.status, body: (yield* response.json) as Record<string, unknown> }
  }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer))

const inspect = (served: Serve.Served, method: "GET" | "POST", path: string, body?: unknown) =>
  http(served, method, `/_fw/inspect/plugins/flags${path}`, body, "inspect-secret")

describe("gating", () => {
  it.scopedLive("a gated procedure fails FlagDisabled before its handler on WebSocket and POST /rpc; the typed client decodes it", () =>
    Effect.gen(function*() {
      const { app } = makeApp()
      const served = yield* Serve.serve(app, memory)
      for (const client of [yield* Serve.wsClient(served, app), yield* Serve.httpClient(served, app)]) {
        const before = ran.report
        assert.deepStrictEqual(yield* client.call(report, {}, { headers: alice }), { ok: true })
        assert.strictEqual(ran.report, before + 1)
        const refused = yield* Effect.either(client.call(report, {}, { headers: bob }))
        assert.isTrue(Either.isLeft(refused))
        if (Either.isLeft(refused)) {
          assert.strictEqual(refused.left._tag, "FlagDisabled")
          if (refused.left._tag === "FlagDisabled") assert.strictEqual(refused.left.flag, "beta")
        }
        assert.strictEqual(ran.report, before + 1, "the handler did not run")
        // A pattern gate: every admin.* procedure needs admin-tools (off).
        const purged = yield* Effect.either(client.call(purge, { what: "x" }, { headers: alice }))
        assert.isTrue(Either.isLeft(purged) && purged.left._tag === "FlagDisabled")
        // Ungated procedures are untouched.
        assert.strictEqual(yield* client.call(echo, { text: "hi" }, { headers: bob }), "hi")
      }
      assert.strictEqual(ran.purge, 0)
    }))

  it.scopedLive("REST projections answer 403 FlagDisabled before the handler; a toggle opens them", () =>
    Effect.gen(function*() {
      const { app } = makeApp()
      const served = yield* Serve.serve(app, memory)
      assert.deepStrictEqual(yield* http(served, "GET", "/v1/beta/report", undefined, "tok-alice"), { status: 200, body: { ok: true } })
      const refused = yield* http(served, "GET", "/v1/beta/report", undefined, "tok-bob")
      assert.strictEqual(refused.status, 403)
      assert.strictEqual(refused.body._tag, "FlagDisabled")
      const purged = yield* http(served, "POST", "/v1/admin/purge", { what: "x" }, "tok-alice")
      assert.deepStrictEqual([purged.status, purged.body._tag], [403, "FlagDisabled"])
      assert.strictEqual(ran.purge, 0)
      const toggled = yield* inspect(served, "POST", "/toggle", { flag: "admin-tools", actor: "ops-1" })
      assert.strictEqual(toggled.status, 200)
      assert.deepStrictEqual(toggled.body.after, { enabled: true, rollout: 100 })
      assert.deepStrictEqual(yield* http(served, "POST", "/v1/admin/purge", { what: "x" }, "tok-alice"), {
        status: 200,
        body: { purged: "x" }
      })
      const ws = yield* Serve.wsClient(served, app)
      assert.deepStrictEqual(yield* ws.call(purge, { what: "y" }, { headers: bob }), { purged: "y" })
    }))

  it.scopedLive("requireFlag as a guard fails FlagDisabled; flagValue serves the typed variant", () =>
    Effect.gen(function*() {
      const { app } = makeApp()
      const served = yield* Serve.serve(app, memory)
      const ws = yield* Serve.wsClient(served, app)
      assert.deepStrictEqual(yield* ws.call(pay, {}, { headers: alice }), { fee: 1 })
      const refused = yield* Effect.either(ws.call(pay, {}, { headers: bob }))
      assert.isTrue(Either.isLeft(refused) && refused.left._tag === "FlagDisabled")
      assert.isTrue(yield* ws.call(check, { key: "beta" }, { headers: alice }))
      assert.isFalse(yield* ws.call(check, { key: "beta" }, { headers: bob }))
    }))

  it.scopedLive("requireFlag on a hand-written REST route answers 403 FlagDisabled (as gated projections do)", () =>
    Effect.gen(function*() {
      const flagged = makeApp()
      const route = defineRestRoute({
        method: "GET",
        path: "/beta-only",
        guards: [requireFlag("beta")],
        handler: () => Effect.succeed({ ok: true })
      })
      // A route's handler reads flags as a procedure's does.
      const probe = defineRestRoute({ method: "GET", path: "/beta-probe", handler: (_input, ctx) => isFlagEnabled(ctx, "beta") })
      const app = defineApp({ procedures: [report], plugins: [flagged.plugin], auth: tokenStrategy, restRoutes: [route, probe] })
      const served = yield* Serve.serve(app, memory)
      assert.deepStrictEqual(yield* http(served, "GET", "/beta-only", undefined, "tok-alice"), { status: 200, body: { ok: true } })
      const refused = yield* http(served, "GET", "/beta-only", undefined, "tok-bob")
      assert.strictEqual(refused.status, 403)
      assert.strictEqual(refused.body._tag, "FlagDisabled")
      assert.match(String(refused.body.message), /"beta" is not enabled/)
      assert.deepStrictEqual(yield* http(served, "GET", "/beta-probe", undefined, "tok-alice"), { status: 200, body: true as never })
      assert.deepStrictEqual(yield* http(served, "GET", "/beta-probe", undefined, "tok-bob"), { status: 200, body: false as never })
    }))

  it("rpc:intercept permissions are requested only when gatedBy is set", () => {
    assert.notInclude(flagsPlugin({ flags: { a: true } }).permissions, "rpc:intercept:query")
    assert.deepStrictEqual(flagsPlugin({ flags: { a: true } }).permissions, ["inspect:read", "inspect:write"])
    const gated = flagsPlugin({ flags: { a: true }, gatedBy: { "x.y": "a" } }).permissions
    for (const kind of ["query", "mutation", "action"]) assert.include(gated, `rpc:intercept:${kind}`)
    assert.deepStrictEqual(flagsPlugin({ flags: { a: true }, gatedBy: {} }).interceptors, [])
  })
})

const liveSuite = (tier: string, store: "memory" | "sql", layer: Layer.Layer<Store.Store | ChangeTap.ChangeTap>) =>
  describe(`flags.evaluate live (${tier}, store: '${store}')`, () => {
    it.scopedLive("a toggle pushes the caller's new flag set over the socket", () =>
      Effect.gen(function*() {
        const { app } = makeApp({ store, usage: { track: false } })
        const served = yield* Serve.serve(app, layer, { applySchema: store === "sql" })
        const evaluate = flagsEvaluate
        assert.strictEqual(app.procedures.get(evaluateTag), flagsEvaluate)
        const ws = yield* Client.connect([evaluate], Client.layerWebSocket(served.wsUrl))
        const results = yield* Queue.unbounded<unknown>()
        yield* ws.live(evaluate, {}, { headers: alice }).pipe(Stream.runForEach((value) => Queue.offer(results, value)), Effect.forkScoped)
        assert.deepStrictEqual(yield* Queue.take(results), { beta: true, "admin-tools": false, checkout: true })
        // What the issue saw: the caller types someone else's name; the row names the authenticated operator.
        yield* inspect(served, "POST", "/toggle", { flag: "beta", actor: "someone-else@acme.test" })
        assert.deepStrictEqual(yield* Queue.take(results), { beta: false, "admin-tools": false, checkout: true })
        yield* inspect(served, "POST", "/toggle", { flag: "admin-tools", note: "ticket 42" })
        assert.deepStrictEqual(yield* Queue.take(results), { beta: false, "admin-tools": true, checkout: true })
        // Each change is logged as the operator, on every tier.
        assert.include(served.logs, `INFO inspect: POST "/_fw/inspect/plugins/flags/toggle" by "system:inspect-token"`)
        const audit = yield* inspect(served, "GET", "/audit")
        if (store === "sql") {
          const entries = audit.body.entries as ReadonlyArray<Record<string, unknown>>
          assert.deepStrictEqual(entries.map((e) => [e.flag, e.operatorType, e.operatorId, e.note, e.actor, e.action]), [
            ["admin-tools", "system", "inspect-token", "ticket 42", null, "toggle"],
            ["beta", "system", "inspect-token", "someone-else@acme.test", null, "toggle"]
          ])
          const one = yield* inspect(served, "GET", "/audit?flag=beta")
          assert.strictEqual((one.body.entries as ReadonlyArray<unknown>).length, 1)
        } else {
          assert.deepStrictEqual(audit.body.entries, [])
          assert.match(String(audit.body.note), /SQL tier only/)
        }
      }))
  })

liveSuite("memory store", "memory", memory)
liveSuite("SQLite", "sql", sqlite)
liveSuite("memory store", "sql", memory)

const operatorSuite = (tier: string, layer: () => Layer.Layer<Store.Store | ChangeTap.ChangeTap>) =>
  describe(`the audit trail records a signed-in operator (${tier})`, () => {
    it.scopedLive("a Subject of the app's strategy with fw:inspect and canToggleFlag is the row's operator; typed text is only a note; without canToggleFlag: 403, no row", () =>
      Effect.gen(function*() {
        // The app's own strategy resolves tok-ops (looked up per request: the scope is withdrawn below).
        const ops = Subject.make({ type: "user", id: "ops-7", tenantId: "acme", scopes: ["fw:inspect", "canToggleFlag"] })
        const subjects: Record<string, Subject.Subject> = { "tok-ops": ops }
        const app = defineApp({ procedures: [report], plugins: [plugin({ store: "sql", usage: { track: false } })], auth: TokenStrategy.make("ops", subjects) })
        const served = yield* Serve.serve(app, layer(), { applySchema: true })
        const toggle = { flag: "beta", actor: "someone-else@acme.test" }
        const toggled = yield* http(served, "POST", "/_fw/inspect/plugins/flags/toggle", toggle, "tok-ops")
        assert.strictEqual(toggled.status, 200)
        assert.include(served.logs, `INFO inspect: POST "/_fw/inspect/plugins/flags/toggle" by "user:ops-7"`)
        const rows = () => Effect.map(inspect(served, "GET", "/audit"), (audit) => audit.body.entries as ReadonlyArray<Record<string, unknown>>)
        const expected = [["beta", "toggle", "user", "ops-7", "someone-else@acme.test", null]]
        const project = (entries: ReadonlyArray<Record<string, unknown>>) => entries.map((e) => [e.flag, e.action, e.operatorType, e.operatorId, e.note, e.actor])
        assert.deepStrictEqual(project(yield* rows()), expected)
        // The same subject without the capability scope: refused before the handler, nothing written.
        subjects["tok-ops"] = Subject.make({ type: "user", id: "ops-7", tenantId: "acme", scopes: ["fw:inspect"] })
        const refused = yield* http(served, "POST", "/_fw/inspect/plugins/flags/toggle", toggle, "tok-ops")
        assert.deepStrictEqual([refused.status, refused.body._tag], [403, "Forbidden"])
        assert.deepStrictEqual(project(yield* rows()), expected)
      }))
  })

operatorSuite("SQLite", () => sqlite)
if (Pg.serverUrl !== null) {
  operatorSuite("PostgreSQL", () => Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provideMerge(Pg.layerFreshClient)))
} else console.warn(Pg.skipReason)

describe("inspect routes", () => {
  it.scopedLive("list shows every flag with its rollout and lifecycle; a refused override is listed and the definition stands", () =>
    Effect.gen(function*() {
      const { app } = makeApp()
      const served = yield* Serve.serve(app, memory)
      const refused = yield* inspect(served, "POST", "/override", {
        flag: "checkout",
        actor: "ops-1",
        override: { variants: [{ name: "low", value: { fee: "free" } }] }
      })
      assert.strictEqual(refused.status, 422)
      assert.strictEqual(refused.body._tag, "OverrideRefused")
      const ws = yield* Serve.wsClient(served, app)
      assert.deepStrictEqual(yield* ws.call(pay, {}, { headers: alice }), { fee: 1 })
      const accepted = yield* inspect(served, "POST", "/override", { flag: "checkout", override: { variants: [{ name: "high", value: { fee: 2 } }] } })
      assert.strictEqual(accepted.status, 200)
      assert.deepStrictEqual(yield* ws.call(pay, {}, { headers: alice }), { fee: 2 })
      const list = yield* inspect(served, "GET", "/list")
      const flags = list.body.flags as ReadonlyArray<Record<string, unknown>>
      assert.deepStrictEqual(flags.map((f) => [f.key, f.kind, f.rollout]), [["beta", "object", 100], ["admin-tools", "boolean", 100], ["checkout", "typed", 100]])
      assert.deepStrictEqual(flags[1]!.lifecycle, { shape: "constantOff", usage: "untracked", lastEvaluatedAt: null, removalCandidate: true })
      const refusals = list.body.refusals as ReadonlyArray<Record<string, unknown>>
      assert.strictEqual(refusals.length, 1)
      assert.strictEqual(refusals[0]!.flag, "checkout")
      assert.match(String(refusals[0]!.reason), /fails the value schema/)
      assert.strictEqual((yield* inspect(served, "POST", "/toggle", { flag: "nope" })).status, 404)
      assert.strictEqual((yield* inspect(served, "POST", "/toggle", { nope: 1 })).status, 400)
      assert.strictEqual((yield* http(served, "POST", "/_fw/inspect/plugins/flags/toggle", { flag: "beta" })).status, 401)
    }))

  it("a flags-only app defines", () => {
    assert.doesNotThrow(() => defineApp({ plugins: [flagsPlugin({ flags: { a: true } })] }))
  })
})
