/**
 * Edge cases of the REST surface over real sockets: an idempotent request whose client disconnects
 * still completes once; a projected procedure's guards hold before any replay; the method gate does
 * not hide routes with broader patterns (or a plugin's route on the same path); a deeply nested
 * body is a 400; every route keeps its own OpenAPI operation; a path's declared body cap is not
 * widened by a sibling without one; a custom idempotency header and TTL.
 */
import { HttpServerResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Schema, TestClock } from "effect"
import { defineApp } from "../../src/app/App.js"
import { requireScope } from "../../src/app/Guard.js"
import { definePlugin } from "../../src/app/Plugin.js"
import { mutation } from "../../src/app/Procedure.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { jsonBody, send } from "./client.js"
import { bearer, Notes, tokenStrategy } from "./fixtures.js"

const memory = () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
const ok = Schema.Struct({ ok: Schema.Boolean })

describe("REST edge cases", () => {
  it.scopedLive("an idempotent request whose client disconnects runs to the end once; the retry gets the replay", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let runs = 0
      const charge = defineRestRoute({
        method: "POST",
        path: "/charge",
        input: Schema.Struct({ body: Schema.Struct({ amount: Schema.Number }) }),
        output: Schema.Struct({ charged: Schema.Number }),
        handler: ({ body }) =>
          Effect.gen(function*() {
            runs++
            yield* Deferred.succeed(started, undefined)
            yield* Deferred.await(release)
            return { charged: body.amount }
          })
      })
      const { url } = yield* Serve.serve(defineApp({ auth: [tokenStrategy], restRoutes: [charge], idempotency: true }), memory())
      const request = jsonBody("POST", { amount: 5 }, { ...bearer("tok-alice"), "idempotency-key": "charge-1" })
      const aborted = new AbortController()
      const first = Effect.runPromise(Effect.either(Effect.tryPromise(() => fetch(`${url}/charge`, { ...request, signal: aborted.signal }))))
      yield* Deferred.await(started)
      aborted.abort()
      assert.strictEqual((yield* Effect.promise(() => first))._tag, "Left")
      // While the first run is still going the key is in flight…
      assert.strictEqual((yield* send(`${url}/charge`, request)).status, 409)
      yield* Deferred.succeed(release, undefined)
      // …and once it has finished, the retry gets its answer without a second run.
      let retry = yield* send(`${url}/charge`, request)
      for (let i = 0; i < 100 && retry.status === 409; i++) {
        yield* Effect.sleep("10 millis")
        retry = yield* send(`${url}/charge`, request)
      }
      assert.deepStrictEqual([retry.status, retry.headers.get("idempotency-replayed"), retry.json()], [200, "true", { charged: 5 }])
      assert.strictEqual(runs, 1)
    }))

  it.scopedLive("a projected procedure's guards hold before the key is looked up: no replay of another caller's answer", () =>
    Effect.gen(function*() {
      const add = mutation("notes.add", {
        input: Schema.Struct({ text: Schema.String }),
        output: Schema.Struct({ id: Schema.String, text: Schema.String }),
        guards: [requireScope("notes:write")],
        publicApi: {},
        handler: ({ text }, { store, subject }) =>
          Effect.map(store.insert(Notes, { tenantId: subject.tenantId ?? "", text, rank: 1 }), (n) => ({ id: n.id, text: n.text }))
      })
      const { url } = yield* Serve.serve(defineApp({ auth: [tokenStrategy], tables: [Notes], procedures: [add], idempotency: true }), memory())
      const as = (token: string) => jsonBody("POST", { text: "alice secret" }, { ...bearer(token), "idempotency-key": "k-1" })
      assert.strictEqual((yield* send(`${url}/v1/notes/add`, as("tok-alice"))).status, 200)
      // carol is in alice's tenant without notes:write: refused, not handed alice's stored answer.
      const carol = yield* send(`${url}/v1/notes/add`, as("tok-carol"))
      assert.strictEqual(carol.status, 403)
      assert.notInclude(carol.text, "alice secret")
      assert.strictEqual((yield* send(`${url}/v1/notes/add`, as("tok-alice"))).headers.get("idempotency-replayed"), "true")
    }))

  it.scopedLive("the method gate does not hide a :param route, a wildcard route or a plugin route on the same paths", () =>
    Effect.gen(function*() {
      const route = <M extends "GET" | "POST">(method: M, path: `/${string}`, name: string) =>
        defineRestRoute({ method, path, output: Schema.Struct({ route: Schema.String }), handler: () => Effect.succeed({ route: name }) })
      const plugin = definePlugin({
        name: "files-upload",
        permissions: [],
        routes: [{ method: "PUT", path: "/files/:id", handler: Effect.succeed(HttpServerResponse.unsafeJson({ route: "plugin put" })) }]
      })
      const { url } = yield* Serve.serve(defineApp({
        plugins: [plugin],
        restRoutes: [
          route("GET", "/items/:id", "item"),
          route("POST", "/items/search", "search"),
          route("GET", "/blobs/*", "blob"),
          route("POST", "/blobs/upload", "upload"),
          route("GET", "/files/:id", "file")
        ]
      }), memory())
      const answer = (method: string, path: string) =>
        Effect.map(send(`${url}${path}`, { method }), (reply) => [reply.status, reply.status === 200 ? (reply.json() as { route: string }).route : reply.headers.get("allow")])
      assert.deepStrictEqual(yield* answer("GET", "/items/search"), [200, "item"])
      assert.deepStrictEqual(yield* answer("POST", "/items/search"), [200, "search"])
      assert.deepStrictEqual(yield* answer("DELETE", "/items/search"), [405, "GET, HEAD, POST"])
      assert.deepStrictEqual(yield* answer("DELETE", "/items/7"), [405, "GET, HEAD"])
      assert.deepStrictEqual(yield* answer("GET", "/blobs/upload"), [200, "blob"])
      assert.deepStrictEqual(yield* answer("PUT", "/files/7"), [200, "plugin put"])
      assert.deepStrictEqual(yield* answer("GET", "/files/7"), [200, "file"])
      assert.deepStrictEqual(yield* answer("DELETE", "/files/7"), [405, "GET, HEAD, PUT"])
    }))

  it.scopedLive("a deeply nested JSON body is a 400, on a hand-written route and on a projection", () =>
    Effect.gen(function*() {
      const echo = defineRestRoute({
        method: "POST",
        path: "/echo-text",
        input: Schema.Struct({ body: Schema.Struct({ text: Schema.String }) }),
        output: ok,
        handler: () => Effect.succeed({ ok: true })
      })
      const projected = mutation("deep.take", {
        input: Schema.Struct({ text: Schema.String }),
        output: ok,
        publicApi: {},
        handler: () => Effect.succeed({ ok: true })
      })
      const { url } = yield* Serve.serve(defineApp({ restRoutes: [echo], procedures: [projected] }), memory())
      const deep = "[".repeat(200_000) + "]".repeat(200_000)
      for (const [path, body] of [["/echo-text", deep], ["/v1/deep/take", `{"text":${deep}}`]] as const) {
        const reply = yield* send(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body })
        assert.strictEqual(reply.status, 400, `${path}: ${reply.text.slice(0, 200)}`)
        assert.isBelow(reply.text.length, 4096)
      }
    }))

  it.scopedLive("routes whose operation ids read alike keep one OpenAPI operation each", () =>
    Effect.gen(function*() {
      const route = (path: `/${string}`) => defineRestRoute({ method: "GET", path, output: ok, handler: () => Effect.succeed({ ok: true }) })
      const { url } = yield* Serve.serve(defineApp({ restRoutes: [route("/a-b"), route("/a_b"), route("/files"), route("/files/*")] }), memory())
      const document = (yield* send(`${url}/openapi.json`)).json() as { paths: Record<string, { get?: { operationId: string } }> }
      const ids = Object.values(document.paths).flatMap((item) => item.get === undefined ? [] : [item.get.operationId])
      assert.strictEqual(ids.length, 4, JSON.stringify(Object.keys(document.paths)))
      assert.strictEqual(new Set(ids).size, 4)
    }))

  it.scopedLive("a sibling route without maxBodyBytes does not widen its path's declared cap", () =>
    Effect.gen(function*() {
      const route = <M extends "POST" | "DELETE">(method: M, maxBodyBytes?: number) =>
        defineRestRoute({
          method,
          path: "/capped",
          input: Schema.Struct({ body: Schema.Unknown }),
          output: ok,
          ...(maxBodyBytes === undefined ? {} : { maxBodyBytes }),
          handler: () => Effect.succeed({ ok: true })
        })
      const { url } = yield* Serve.serve(defineApp({ restRoutes: [route("POST", 1024), route("DELETE")] }), memory())
      const body = JSON.stringify({ text: "x".repeat(2048) })
      for (const method of ["POST", "DELETE"]) {
        const reply = yield* send(`${url}/capped`, { method, headers: { "content-type": "application/json" }, body })
        assert.strictEqual(reply.status, 413, method)
      }
    }))

  it.scoped("idempotency with a custom header and TTL: replay within it, a new run after it lapses", () =>
    Effect.gen(function*() {
      let runs = 0
      const login = defineRestRoute({
        method: "POST",
        path: "/token",
        input: Schema.Struct({ body: Schema.Struct({ user: Schema.String }) }),
        output: Schema.Struct({ run: Schema.Number }),
        handler: () => Effect.sync(() => ({ run: ++runs }))
      })
      const { url } = yield* Serve.serve(
        defineApp({ restRoutes: [login], idempotency: { header: "X-Request-Key", ttlMs: 60_000 } }),
        memory()
      )
      const request = jsonBody("POST", { user: "u" }, { "x-request-key": "k-1" })
      const first = yield* send(`${url}/token`, request)
      assert.deepStrictEqual([first.status, first.json()], [200, { run: 1 }])
      const replayed = yield* send(`${url}/token`, request)
      assert.deepStrictEqual([replayed.json(), replayed.headers.get("idempotency-replayed")], [{ run: 1 }, "true"])
      // The default header is not the key here.
      assert.deepStrictEqual((yield* send(`${url}/token`, jsonBody("POST", { user: "u" }, { "idempotency-key": "k-1" }))).json(), { run: 2 })
      yield* TestClock.adjust("61 seconds")
      const after = yield* send(`${url}/token`, request)
      assert.deepStrictEqual([after.json(), after.headers.get("idempotency-replayed")], [{ run: 3 }, null])
    }))
})
