/**
 * Cross-site request forgery on cookie sessions (issue 18), over real sockets on every transport:
 * `POST /rpc`, the rpc WebSocket upgrade, REST mutations and projections, an authenticated plugin
 * route. A cookie-authenticated request must come from the app's origin (or a trusted one) and send
 * JSON when it has a body; otherwise its cookies do not authenticate it (403 when they alone
 * would have). Bearer-token requests are not concerned.
 */
import { Headers, HttpServerResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { request as httpRequest } from "node:http"
import WebSocket from "ws"
import { defineApp } from "../../src/app/App.js"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import * as Plugin from "../../src/app/Plugin.js"
import * as CrossSite from "../../src/app/CrossSite.js"
import { action, mutation, PublicApiInvalid, query } from "../../src/app/Procedure.js"
import type * as Procedure from "../../src/app/Procedure.js"
import { issueSession, passwordSessionStrategy } from "../../src/auth/Session.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Projection from "../../src/http/Projection.js"
import * as Serve from "../support/Serve.js"

const secret = "cross-site-session-secret-0123456789"
const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const Caller = Schema.Struct({ type: Schema.String, id: Schema.String })

const whoAmI = query("who", {
  input: Schema.Struct({}),
  output: Caller,
  publicApi: {},
  handler: (_, { subject }) => Effect.succeed({ type: subject.type, id: subject.id })
})

const touch = mutation("touch", {
  input: Schema.Struct({ note: Schema.optional(Schema.String) }),
  output: Caller,
  publicApi: {},
  handler: (_, { subject }) => Effect.succeed({ type: subject.type, id: subject.id })
})

const restTouch = defineRestRoute({
  method: "POST",
  path: "/touch",
  output: Caller,
  handler: (_, { subject }) => Effect.succeed({ type: subject.type, id: subject.id })
})

/** Bearer `token-bob` is bob; the session cookie is whoever it was issued for. */
const bearerStrategy: AuthStrategy.AuthStrategy = {
  id: "test-bearer",
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.succeed(
      AuthStrategy.readBearer(headers) === "token-bob"
        ? AuthStrategy.Verdict.Authenticated({ subject: Subject.make({ type: "user", id: "bob", tenantId: "t" }) })
        : AuthStrategy.Verdict.NoMatch()
    )
}

const plugin = Plugin.definePlugin({
  name: "cross-site-test",
  permissions: [],
  routes: [{
    method: "POST",
    path: "/plugin/touch",
    handler: Effect.map(Subject.CurrentSubject, (subject) => HttpServerResponse.unsafeJson({ type: subject.type, id: subject.id }))
  }]
})

const app = (trustedOrigins?: ReadonlyArray<string>) =>
  defineApp({
    name: "cross-site",
    procedures: [whoAmI, touch],
    restRoutes: [restTouch],
    plugins: [plugin],
    // The cookie strategy first: a cookie must not win over a caller's own bearer token cross-site.
    auth: [passwordSessionStrategy({ secret }), bearerStrategy],
    ...(trustedOrigins === undefined ? {} : { http: { trustedOrigins } })
  })

const aliceCookie = Effect.map(
  issueSession(Subject.make({ type: "user", id: "alice", tenantId: "t" }), secret),
  (value) => `fw:session=${value}`
)

interface Answer {
  readonly status: number
  readonly body: string
}

const send = (url: string, init: RequestInit) =>
  Effect.promise(async (): Promise<Answer> => {
    const response = await fetch(url, { redirect: "manual", ...init })
    return { status: response.status, body: await response.text() }
  })

/** A GET with exactly `headers` (fetch sets its own `Sec-Fetch-Mode: cors`, as a browser's fetch would). */
const rawGet = (url: string, headers: Record<string, string>) =>
  Effect.async<Answer>((resume) => {
    const request = httpRequest(url, { headers }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (body += chunk))
      response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, body })))
    })
    request.on("error", (error) => resume(Effect.die(error)))
    request.end()
  })

const rpcBody = (tag: string) => JSON.stringify({ _tag: "Request", id: "1", tag, payload: {}, headers: [] })

/** The caller id a `POST /rpc` answer ran as, or the status when refused. */
const rpcCaller = (answer: Answer) => {
  if (answer.status !== 200) return answer.status
  const [exit] = JSON.parse(answer.body) as ReadonlyArray<{ exit: { _tag: string; value?: { id: string } } }>
  return exit!.exit._tag === "Success" ? exit!.exit.value!.id : exit!.exit._tag
}

const postRpc = (url: string, headers: Record<string, string>, tag = "touch") =>
  Effect.map(send(`${url}/rpc`, { method: "POST", headers, body: rpcBody(tag) }), rpcCaller)

/** Opens the rpc WebSocket with `headers`: "open" or the upgrade's refusal status. */
const upgrade = (wsUrl: string, headers: Record<string, string>) =>
  Effect.async<string | number>((resume) => {
    const socket = new WebSocket(wsUrl, { headers })
    socket.on("open", () => {
      socket.close()
      resume(Effect.succeed("open"))
    })
    socket.on("unexpected-response", (_request, response) => {
      resume(Effect.succeed(response.statusCode ?? 0))
      socket.terminate()
    })
    socket.on("error", () => resume(Effect.succeed("error")))
  })

describe("cross-site requests on cookie sessions", () => {
  it.scopedLive("POST /rpc: a text/plain body, another Origin or Sec-Fetch-Site cross-site is refused for a cookie; same-origin JSON runs as the cookie's user", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app(), memory)
      const cookie = yield* aliceCookie
      const self = served.url
      // What a cross-site form or fetch without preflight sends.
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "text/plain" }), 403)
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/x-www-form-urlencoded" }), 403)
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/json", origin: "https://evil.test" }), 403)
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/json", origin: "null" }), 403)
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/json", "sec-fetch-site": "cross-site" }), 403)
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/json", "sec-fetch-site": "same-site" }), 403)
      // Same origin, or no browser markers at all (a server-side client), with JSON: the user.
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/json", origin: self }), "alice")
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/json", "sec-fetch-site": "same-origin" }), "alice")
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/json" }), "alice")
    }))

  it.scopedLive("POST /rpc: message headers cannot vouch for the transport (an Origin inside the body is not the request's)", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app(), memory)
      const cookie = yield* aliceCookie
      const body = JSON.stringify({
        _tag: "Request",
        id: "1",
        tag: "touch",
        payload: {},
        headers: [["origin", served.url], ["content-type", "application/json"]]
      })
      const answer = yield* send(`${served.url}/rpc`, { method: "POST", headers: { cookie, "content-type": "text/plain", origin: "https://evil.test" }, body })
      assert.strictEqual(answer.status, 403)
    }))

  it.scopedLive("bearer-token requests are unaffected; cross-site, a bearer wins over the cookie; an unrelated cookie stays anonymous", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app(), memory)
      const cookie = yield* aliceCookie
      const bearer = { authorization: "Bearer token-bob" }
      assert.strictEqual(yield* postRpc(served.url, { ...bearer, "content-type": "text/plain", origin: "https://evil.test" }), "bob")
      // The session strategy comes first: same-origin, the cookie decides; cross-site it is ignored.
      assert.strictEqual(yield* postRpc(served.url, { ...bearer, cookie, "content-type": "application/json", origin: served.url }), "alice")
      assert.strictEqual(yield* postRpc(served.url, { ...bearer, cookie, "content-type": "application/json", origin: "https://evil.test" }), "bob")
      assert.strictEqual(yield* postRpc(served.url, { cookie: "theme=dark", "content-type": "text/plain", origin: "https://evil.test" }, "who"), "anonymous")
    }))

  it.scopedLive("http.trustedOrigins admits another origin for cookie requests; a malformed entry is refused at definition", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app(["https://app.example.test"]), memory)
      const cookie = yield* aliceCookie
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/json", origin: "https://app.example.test" }), "alice")
      assert.strictEqual(yield* postRpc(served.url, { cookie, "content-type": "application/json", origin: "https://other.example.test" }), 403)
      assert.throws(() => app(["https://app.example.test/path"]))
      assert.throws(() => app(["app.example.test"]))
    }))

  it.scopedLive("the WebSocket upgrade: another Origin with the session cookie is refused; the same origin connects", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app(), memory)
      const cookie = yield* aliceCookie
      assert.strictEqual(yield* upgrade(served.wsUrl, { cookie, origin: "https://evil.test" }), 403)
      assert.strictEqual(yield* upgrade(served.wsUrl, { cookie, origin: served.url }), "open")
      assert.strictEqual(yield* upgrade(served.wsUrl, { origin: "https://evil.test" }), "open")
      assert.strictEqual(yield* upgrade(served.wsUrl, { cookie, "sec-fetch-site": "cross-site", "sec-fetch-mode": "websocket" }), 403)
    }))

  it.scopedLive("REST: a projected mutation, a hand-written mutation and a projected query refuse cross-site cookie requests", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app(), memory)
      const cookie = yield* aliceCookie
      const caller = (answer: Answer) => (answer.status === 200 ? (JSON.parse(answer.body) as { id: string }).id : answer.status)
      const post = (path: string, headers: Record<string, string>, body?: string) =>
        Effect.map(send(`${served.url}${path}`, { method: "POST", headers, ...(body === undefined ? {} : { body }) }), caller)
      for (const path of ["/v1/touch", "/touch"]) {
        assert.strictEqual(yield* post(path, { cookie, "content-type": "application/x-www-form-urlencoded" }, "note=x"), 403, path)
        assert.strictEqual(yield* post(path, { cookie, "content-type": "text/plain" }, "{}"), 403, path)
        assert.strictEqual(yield* post(path, { cookie, "content-type": "application/json", origin: "https://evil.test" }, "{}"), 403, path)
        assert.strictEqual(yield* post(path, { cookie, "content-type": "application/json", origin: served.url }, "{}"), "alice", path)
        assert.strictEqual(yield* post(path, { authorization: "Bearer token-bob", "content-type": "application/x-www-form-urlencoded" }, "note=x"), "bob", path)
      }
      const get = (headers: Record<string, string>) => Effect.map(rawGet(`${served.url}/v1/who`, headers), caller)
      assert.strictEqual(yield* get({ cookie, origin: "https://evil.test" }), 403)
      assert.strictEqual(yield* get({ cookie, "sec-fetch-site": "cross-site" }), 403)
      assert.strictEqual(yield* get({ cookie, "sec-fetch-site": "cross-site", "sec-fetch-mode": "cors", origin: "https://evil.test" }), 403)
      assert.strictEqual(yield* get({ cookie, "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "embed" }), 403)
      assert.strictEqual(yield* get({ cookie, "sec-fetch-site": "same-origin" }), "alice")
      assert.strictEqual(yield* get({ cookie }), "alice")
      // A link followed from another site (or the redirect after an IdP login): a top-level
      // navigation, which SameSite=Lax lets through as well; its answer goes to the user's window.
      assert.strictEqual(yield* get({ cookie, "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" }), "alice")
      // A cross-site form post is a navigation too, but not a GET.
      const formPost = yield* send(`${served.url}/v1/touch`, {
        method: "POST",
        headers: { cookie, "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "content-type": "application/json", origin: "https://evil.test" },
        body: "{}"
      })
      assert.strictEqual(formPost.status, 403)
    }))

  it.scopedLive("an authenticated plugin route refuses a cross-site cookie request", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app(), memory)
      const cookie = yield* aliceCookie
      const post = (headers: Record<string, string>) =>
        Effect.map(send(`${served.url}/plugin/touch`, { method: "POST", headers }), (answer) =>
          answer.status === 200 ? (JSON.parse(answer.body) as { id: string }).id : answer.status)
      assert.strictEqual(yield* post({ cookie, origin: "https://evil.test" }), 403)
      assert.strictEqual(yield* post({ cookie, origin: served.url }), "alice")
    }))

  it("a mutation or action projected as GET (or HEAD) is refused at definition with PublicApiInvalid", () => {
    const options = {
      input: Schema.Struct({ title: Schema.String }),
      output: Schema.Struct({}),
      handler: () => Effect.succeed({})
    }
    // The issue's declaration: a link to /v1/notes/quickAdd?title=x would write for whoever follows it.
    // @ts-expect-error a mutation's publicApi method is never GET
    const quickAdd = () => mutation("notes.quickAdd", { ...options, publicApi: { method: "GET" } })
    assert.throws(quickAdd, PublicApiInvalid)
    assert.throws(quickAdd, /mutation "notes\.quickAdd" \(publicApi\): a mutation cannot be projected as "GET"/)
    // @ts-expect-error an action's publicApi method is never GET
    assert.throws(() => action("mail.send", { ...options, publicApi: { method: "GET" } }), PublicApiInvalid)
    const head = { method: "HEAD" } as unknown as Procedure.StateChangingPublicApi
    assert.throws(() => mutation("notes.head", { ...options, publicApi: head }), PublicApiInvalid)
    // Queries may be GET; mutations keep POST, PUT, PATCH and DELETE.
    assert.doesNotThrow(() => query("notes.find", { ...options, publicApi: { method: "GET" } }))
    for (const method of ["POST", "PUT", "PATCH", "DELETE"] as const) {
      assert.doesNotThrow(() => mutation("notes.put", { ...options, publicApi: { method } }))
    }
    // A procedure object built by hand is checked again when it is projected.
    const built: Procedure.Any = { ...mutation("notes.built", options), publicApi: { method: "GET" } }
    assert.throws(() => Projection.endpoints([built]), PublicApiInvalid)
  })

  it("the navigation exception is for routes that only read: a mutation's or action's route never gets it", () => {
    const headers = (input: Record<string, string>) => Headers.fromInput(input)
    const navigation = { cookie: "fw:session=x", "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" }
    assert.isUndefined(CrossSite.problem("GET", headers(navigation), new Set(), { navigable: true }))
    assert.isString(CrossSite.problem("GET", headers(navigation), new Set(), { navigable: false }))
    assert.isString(CrossSite.problem("GET", headers(navigation), new Set()))
    assert.isString(CrossSite.problem("HEAD", headers(navigation), new Set()))
    // Which requests keep their cookies only as a navigation (their store refuses writes).
    assert.isTrue(CrossSite.viaNavigation("GET", headers(navigation), new Set()))
    assert.isFalse(CrossSite.viaNavigation("GET", headers({ ...navigation, "sec-fetch-site": "same-origin" }), new Set()))
    assert.isFalse(CrossSite.viaNavigation("GET", headers({ ...navigation, "sec-fetch-site": "none" }), new Set()))
    assert.isFalse(CrossSite.viaNavigation("GET", headers({ cookie: "fw:session=x" }), new Set()))
    const { cookie: _, ...withoutCookie } = navigation
    assert.isFalse(CrossSite.viaNavigation("GET", headers(withoutCookie), new Set()))
  })

  it.scopedLive("a GET route that writes, reached by another site's navigation with the cookie: 403 StoreWriteDenied, nothing written; REST and plugin routes", () =>
    Effect.gen(function*() {
      const Marks = defineTable("xsite_marks", { fields: { by: Schema.String } })
      const restMark = defineRestRoute({
        method: "GET",
        path: "/mark",
        handler: (_, { store, subject }) => Effect.as(store.insert(Marks, { by: `rest:${subject.id}` }), { ok: true })
      })
      const marks = defineRestRoute({
        method: "GET",
        path: "/marks",
        handler: (_, { store }) => Effect.map(store.find(Marks, {}), (rows) => rows.map((row) => row.by).sort())
      })
      const marking = Plugin.definePlugin({
        name: "cross-site-marks",
        permissions: ["store:write"],
        tables: [Marks],
        routes: [{
          method: "GET",
          path: "/plugin/mark",
          handler: Effect.gen(function*() {
            const store = yield* Store.Store
            const subject = yield* Subject.CurrentSubject
            yield* store.insert(Marks, { by: `plugin:${subject.id}` })
            return HttpServerResponse.unsafeJson({ ok: true })
          })
        }]
      })
      const served = yield* Serve.serve(
        defineApp({ name: "marks", procedures: [whoAmI], restRoutes: [restMark, marks], plugins: [marking], auth: [passwordSessionStrategy({ secret })] }),
        memory
      )
      const cookie = yield* aliceCookie
      const navigation = { cookie, "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" }
      for (const path of ["/mark", "/plugin/mark"]) {
        const forged = yield* rawGet(`${served.url}${path}`, navigation)
        assert.strictEqual(forged.status, 403, path)
        assert.strictEqual((JSON.parse(forged.body) as { _tag: string })._tag, "StoreWriteDenied", path)
        // Typed in the address bar, or followed from the app's own page: it writes.
        assert.strictEqual((yield* rawGet(`${served.url}${path}`, { ...navigation, "sec-fetch-site": "none" })).status, 200, path)
        assert.strictEqual((yield* rawGet(`${served.url}${path}`, { ...navigation, "sec-fetch-site": "same-origin" })).status, 200, path)
      }
      assert.deepStrictEqual(JSON.parse((yield* rawGet(`${served.url}/marks`, {})).body), ["plugin:alice", "plugin:alice", "rest:alice", "rest:alice"])
      // The read reached the same way still answers the user.
      const read = yield* rawGet(`${served.url}/v1/who`, navigation)
      assert.strictEqual(read.status, 200)
      assert.strictEqual((JSON.parse(read.body) as { id: string }).id, "alice")
    }))
})
