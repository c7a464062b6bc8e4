/**
 * Direct dispatch (`Dispatch`, `DirectRoute`): `NodeServer` finds a request's route in a mirror of
 * the router and calls the route's eager twin, only where the router would pick that route and
 * nothing the twin cannot reproduce wraps it; the fw REST pipeline answers the same through its
 * twin as through the router.
 */
import { HttpLayerRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, FiberRef, Layer, Logger, Schema, Tracer } from "effect"
import { vi } from "vitest"
import { NodeHttpServer } from "@effect/platform-node"
import { createServer } from "node:http"
import * as Net from "node:net"
import { defineApp } from "../../src/app/App.js"
import type { App } from "../../src/app/App.js"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import * as DirectRoute from "../../src/app/DirectRoute.js"
import { requireScope } from "../../src/app/Guard.js"
import { query } from "../../src/app/Procedure.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Provenance from "../../src/kernel/changes/Provenance.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as NodeServer from "../../src/server/NodeServer.js"
import * as Server from "../../src/server/Server.js"
import * as Serve from "../support/Serve.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

/** A pass-through tracer: installed, it sends every request through the router. */
const passThrough = Effect.runSync(Effect.map(Effect.tracer, (native) => Tracer.make({ span: (...args) => native.span(...args), context: native.context })))

/**
 * Serves `app` (and `routes`) on `NodeServer` (or on the platform's own Node server) in the scope,
 * with `tracer` installed if given; the base URL.
 */
const serve = (app: App, routes?: Server.Options["routes"], tracer?: Tracer.Tracer, logs: Array<string> = [], platform = false) =>
  Effect.gen(function*() {
    const serving = Server.layer(app, { announce: false, ...(routes === undefined ? {} : { routes }) }).pipe(
      Layer.provide(memory),
      Layer.provideMerge(platform
        ? Layer.orDie(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
        : NodeServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    )
    const context = yield* Layer.build(tracer === undefined ? serving : serving.pipe(Layer.provide(Layer.setTracer(tracer)))).pipe(
      Effect.provide(Logger.replace(Logger.defaultLogger, Serve.capture(logs)))
    )
    const { address } = Context.get(context, HttpServer.HttpServer)
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
    return `http://127.0.0.1:${address.port}`
  })

const get = (url: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    const headers = Object.fromEntries([...response.headers].filter(([name]) => name !== "date" && name !== "x-fw-trace-id"))
    return { status: response.status, headers, text: await response.text() }
  })

/**
 * The bytes a server sends back for `requests` sent at once on one connection (the last one asks to close
 * it), without the `date` and `x-fw-trace-id` lines (a clock and a random id).
 */
const raw = (url: string, requests: ReadonlyArray<string>) =>
  Effect.async<string>((resume) => {
    const { hostname, port } = new URL(url)
    const chunks: Array<Buffer> = []
    const socket = Net.connect(Number(port), hostname, () => socket.write(requests.join("")))
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.on("close", () =>
      resume(Effect.succeed(Buffer.concat(chunks).toString("utf8").replace(/^(date|x-fw-trace-id): [^\r]*\r\n/gim, ""))))
  })

/** `GET /twin/:id`: the router's handler answers `routed`, its twin `direct <id>`. */
const twin = DirectRoute.withDirect(
  Effect.succeed(HttpServerResponse.text("routed")),
  (_request, params) => Effect.succeed(HttpServerResponse.text(`direct ${params.id}`))
)
const twinRoutes = HttpLayerRouter.use((router) =>
  Effect.all([
    router.add("GET", "/twin/:id", twin),
    router.add("GET", "/twin/static", HttpServerResponse.text("static"))
  ]))

describe("direct dispatch", () => {
  it.scopedLive("a route's twin answers on NodeServer where the router would pick the route; with a tracer installed the router answers", () =>
    Effect.gen(function*() {
      const url = yield* serve(defineApp({}), twinRoutes)
      assert.strictEqual((yield* get(`${url}/twin/7`)).text, "direct 7")
      // The router prefers the static path: so does the mirror.
      assert.strictEqual((yield* get(`${url}/twin/static`)).text, "static")
      // HEAD falls back to the GET route, as in the router.
      const head = yield* get(`${url}/twin/7`, { method: "HEAD" })
      assert.strictEqual(head.status, 200)
      assert.strictEqual((yield* get(`${url}/nowhere`)).status, 404)
      const traced = yield* serve(defineApp({}), twinRoutes, passThrough)
      assert.strictEqual((yield* get(`${traced}/twin/7`)).text, "routed")
    }))

  it.scopedLive("a global middleware without an eager form, or a prefixed sub-router, turns direct dispatch off", () =>
    Effect.gen(function*() {
      const global = HttpLayerRouter.middleware(
        (effect) => Effect.map(effect, (response) => HttpServerResponse.setHeader(response, "x-global", "yes")),
        { global: true }
      )
      const url = yield* serve(defineApp({}), Layer.mergeAll(twinRoutes, global))
      const answer = yield* get(`${url}/twin/7`)
      assert.strictEqual(answer.text, "routed")
      assert.strictEqual(answer.headers["x-global"], "yes")
      const prefixed = HttpLayerRouter.use((router) => router.prefixed("/p").add("GET", "/x", HttpServerResponse.text("prefixed")))
      const other = yield* serve(defineApp({}), Layer.mergeAll(twinRoutes, prefixed))
      assert.strictEqual((yield* get(`${other}/twin/7`)).text, "routed")
      assert.strictEqual((yield* get(`${other}/p/x`)).text, "prefixed")
    }))

  const Item = Schema.Struct({ id: Schema.String, name: Schema.String })
  const reader = Subject.make({ type: "user", id: "u1", tenantId: "t1", scopes: ["items:read"] })
  const stranger = Subject.make({ type: "user", id: "u2", tenantId: "t1", scopes: [] })
  // Synchronous (`Effect.succeed`): the whole pipeline answers at once, with no fiber.
  const bearer: AuthStrategy.AuthStrategy = {
    id: "bearer",
    outboundHosts: [],
    authenticate: ({ headers }) => {
      const token = AuthStrategy.readBearer(headers)
      return Effect.succeed(
        token === undefined
          ? AuthStrategy.Verdict.NoMatch()
          : token === "reader"
          ? AuthStrategy.Verdict.Authenticated({ subject: reader })
          : token === "stranger"
          ? AuthStrategy.Verdict.Authenticated({ subject: stranger })
          : AuthStrategy.Verdict.Failed({ reason: "unknown token" })
      )
    }
  }
  const app = defineApp({
    auth: [bearer],
    http: { cors: { origins: ["https://app.example"] } },
    procedures: [
      query("items.get", {
        input: Schema.Struct({ id: Schema.String }),
        output: Item,
        guards: [requireScope("items:read")],
        handler: ({ id }) => id === "boom" ? Effect.fail({ status: 418, message: "no" }) : Effect.succeed({ id, name: `item ${id}` })
      })
    ],
    restRoutes: [
      defineRestRoute({
        method: "GET",
        path: "/items/:id",
        input: Schema.Struct({ params: Schema.Struct({ id: Schema.String.pipe(Schema.minLength(2)) }) }),
        output: Item,
        etag: true,
        guards: [requireScope("items:read")],
        handler: ({ params }, ctx) =>
          params.id === "boom"
            ? Effect.die("boom")
            : params.id === "slow"
            ? Effect.map(Effect.yieldNow(), () => ({ id: params.id, name: "slow" }))
            : params.id === "teapot"
            ? Effect.fail({ status: 418, message: "short and stout" })
            : params.id === "header"
            ? Effect.as(ctx.response.setHeader("x-handler", "set"), { id: params.id, name: "header" })
            : Effect.succeed({ id: params.id, name: `item ${params.id}` })
      }),
      defineRestRoute({
        method: "GET",
        path: "/old/:id",
        version: "v1",
        deprecated: "GET /v2/items",
        output: Item,
        handler: () => Effect.succeed({ id: "old", name: "old" })
      })
    ]
  })

  const rpcCall = (tag: string, payload: unknown) => JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })

  it.scopedLive("the REST pipeline answers the same through its twin as through the router", () =>
    Effect.gen(function*() {
      const [directLogs, routedLogs]: Array<Array<string>> = [[], []]
      const direct = yield* serve(app, undefined, undefined, directLogs)
      const routed = yield* serve(app, undefined, passThrough, routedLogs)
      const etag = (yield* get(`${direct}/items/42`, { headers: { authorization: "Bearer reader" } })).headers["etag"]!
      const cases: ReadonlyArray<readonly [string, RequestInit]> = [
        ["/items/42", { headers: { authorization: "Bearer reader" } }],
        ["/items/42", { headers: { authorization: "Bearer reader", "if-none-match": etag } }],
        ["/items/42", { method: "HEAD", headers: { authorization: "Bearer reader" } }],
        ["/items/42", { headers: { authorization: "Bearer stranger" } }],
        ["/items/42", { headers: { authorization: "Bearer forged" } }],
        ["/items/42", {}],
        ["/items/4", { headers: { authorization: "Bearer reader" } }],
        ["/items/teapot", { headers: { authorization: "Bearer reader" } }],
        ["/items/slow", { headers: { authorization: "Bearer reader" } }],
        ["/items/header", { headers: { authorization: "Bearer reader" } }],
        ["/items/42", { headers: { authorization: "Bearer reader", origin: "https://app.example" } }],
        ["/items/42", { headers: { authorization: "Bearer reader", origin: "https://evil.example" } }],
        ["/items/42", { headers: { cookie: "session=x", origin: "https://evil.example" } }],
        ["/v1/old/1", {}],
        ["/items/42", { method: "DELETE" }],
        // POST /rpc: a call, its guard refusing, a failing handler, an unknown procedure, a bad body.
        ...[
          [{ authorization: "Bearer reader" }, rpcCall("items.get", { id: "7" })],
          [{ authorization: "Bearer stranger" }, rpcCall("items.get", { id: "7" })],
          [{ authorization: "Bearer reader" }, rpcCall("items.get", { id: "boom" })],
          [{ authorization: "Bearer reader" }, rpcCall("items.nope", {})],
          [{ authorization: "Bearer reader" }, "{not json"],
          [{ cookie: "session=x", origin: "https://evil.example" }, rpcCall("items.get", { id: "7" })]
        ].map(([headers, body]) => ["/rpc", { method: "POST", headers: { "content-type": "application/json", ...headers as Record<string, string> }, body: body as string }] as const)
      ]
      for (const [path, init] of cases) {
        const viaTwin = yield* get(`${direct}${path}`, init)
        const viaRouter = yield* get(`${routed}${path}`, init)
        assert.deepStrictEqual(viaTwin, viaRouter, `${init.method ?? "GET"} ${path}`)
      }
      assert.strictEqual((yield* get(`${direct}/items/42`, { headers: { authorization: "Bearer reader", "if-none-match": etag } })).status, 304)
      assert.strictEqual((yield* get(`${direct}/items/header`, { headers: { authorization: "Bearer reader" } })).headers["x-handler"], "set")
      assert.strictEqual((yield* get(`${direct}/v1/old/1`)).headers["deprecation"], "true")
      const allowed = yield* get(`${direct}/items/42`, { headers: { authorization: "Bearer reader", origin: "https://app.example" } })
      assert.strictEqual(allowed.headers["access-control-allow-origin"], "https://app.example")
      // A defect is a 500 quoting a fresh trace id (so the bodies differ): the same shape both ways.
      const [boomTwin, boomRouter] = [
        yield* get(`${direct}/items/boom`, { headers: { authorization: "Bearer reader" } }),
        yield* get(`${routed}/items/boom`, { headers: { authorization: "Bearer reader" } })
      ]
      assert.strictEqual(boomTwin.status, 500)
      assert.strictEqual(boomRouter.status, 500)
      assert.deepStrictEqual(Object.keys(JSON.parse(boomTwin.text)), Object.keys(JSON.parse(boomRouter.text)))
      // ... and is logged both ways.
      for (const logs of [directLogs, routedLogs]) {
        assert.deepStrictEqual(logs.map((line) => line.startsWith("ERROR GET /items/:id failed unexpectedly")), [true])
      }
    }))

  /** `app` with one more REST route. */
  const withRoute = (route: App["restRoutes"][number]) => defineApp({ auth: [bearer], restRoutes: [...app.restRoutes, route] })

  it.scopedLive("a JSON answer leaves byte for byte as the platform's own Node server sends it", () =>
    Effect.gen(function*() {
      const withBodies = withRoute(defineRestRoute({
        method: "GET",
        path: "/plain/:id",
        input: Schema.Struct({ params: Schema.Struct({ id: Schema.String }) }),
        output: Item,
        handler: ({ params }) => Effect.succeed({ id: params.id, name: `crème brûlée № ${params.id} ✓` })
      }))
      const direct = yield* serve(withBodies)
      const routed = yield* serve(withBodies, undefined, passThrough)
      const platform = yield* serve(withBodies, undefined, undefined, [], true)
      const etag = (yield* get(`${direct}/items/42`, { headers: { authorization: "Bearer reader" } })).headers["etag"]!
      const request = (line: string, ...headers: Array<string>) => `${line} HTTP/1.1\r\nhost: x\r\n${headers.map((h) => `${h}\r\n`).join("")}\r\n`
      const requests = [
        request("GET /items/42", "authorization: Bearer reader"),
        request("GET /items/42", "authorization: Bearer reader", `if-none-match: ${etag}`),
        request("GET /items/42", "authorization: Bearer reader", `if-none-match: "other", ${etag.slice(2)}`),
        request("HEAD /items/42", "authorization: Bearer reader"),
        request("HEAD /items/42", "authorization: Bearer reader", `if-none-match: ${etag}`),
        request("GET /items/header", "authorization: Bearer reader"),
        request("GET /items/42?x=1&x=2", "authorization: Bearer reader", "cookie: a=b"),
        request("GET /items/42", "authorization: Bearer stranger"),
        request("GET /items/4", "authorization: Bearer reader"),
        request("GET /plain/%C3%A9t%C3%A9"),
        request("HEAD /plain/7"),
        request("GET /v1/old/1"),
        request("GET /items/42", "authorization: Bearer reader", "origin: https://app.example"),
        request("GET /items/42", "authorization: Bearer reader", "connection: close")
      ]
      const viaTwin = yield* raw(direct, requests)
      assert.strictEqual(viaTwin.match(/HTTP\/1\.1 \d{3} /g)?.length, requests.length)
      assert.include(viaTwin, "crème brûlée № été ✓")
      assert.strictEqual(viaTwin, yield* raw(routed, requests))
      assert.strictEqual(viaTwin, yield* raw(platform, requests))
    }))

  it.scopedLive("a request's trace id is made only when something reads it, once per request", () =>
    Effect.gen(function*() {
      const traced = withRoute(defineRestRoute({
        method: "GET",
        path: "/trace",
        output: Schema.Struct({ first: Schema.String, again: Schema.String, provenance: Schema.String }),
        handler: (_, ctx) =>
          Effect.map(FiberRef.get(Provenance.current), (provenance) => ({
            first: ctx.traceId,
            again: ctx.traceId,
            provenance: provenance.traceId
          }))
      }))
      const url = yield* serve(traced)
      const uuids = vi.spyOn(globalThis.crypto, "randomUUID")
      yield* Effect.addFinalizer(() => Effect.sync(() => uuids.mockRestore()))
      // A plain GET answered at once reads no trace id: none is made.
      assert.strictEqual((yield* get(`${url}/items/42`, { headers: { authorization: "Bearer reader" } })).status, 200)
      assert.strictEqual((yield* get(`${url}/items/4`, { headers: { authorization: "Bearer reader" } })).status, 400)
      assert.strictEqual(uuids.mock.calls.length, 0)
      // Read by the handler and by the provenance of its writes: one id, the same everywhere.
      const read = JSON.parse((yield* get(`${url}/trace`)).text) as { first: string; again: string; provenance: string }
      assert.strictEqual(uuids.mock.calls.length, 1)
      assert.match(read.first, /^[0-9a-f]{32}$/)
      assert.deepStrictEqual([read.again, read.provenance], [read.first, read.first])
      // A caller's own well-formed trace id is used as is.
      const given = JSON.parse((yield* get(`${url}/trace`, { headers: { "x-fw-trace-id": "trace-0123456789" } })).text) as { first: string }
      assert.strictEqual(given.first, "trace-0123456789")
      assert.strictEqual(uuids.mock.calls.length, 1)
    }))
})
