/**
 * Cross-site request forgery on cookie sessions (issue 18), over real sockets on every transport:
 * `POST /rpc`, the rpc WebSocket upgrade, REST mutations and projections, an authenticated plugin
 * route. A cookie-authenticated request must come from the app's origin (or a trusted one) and send
 * JSON when it has a body; otherwise its cookies do not authenticate it (403 when they alone
 * would have). Bearer-token requests are not concerned.
 */
import { HttpServerResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { request as httpRequest } from "node:http"
import WebSocket from "ws"
import { defineApp } from "../../src/app/App.js"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import * as Plugin from "../../src/app/Plugin.js"
import { mutation, query } from "../../src/app/Procedure.js"
import { issueSession, passwordSessionStrategy } from "../../src/auth/Session.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
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
})
