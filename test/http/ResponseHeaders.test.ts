/**
 * Headers and cookies a REST handler sets through `ctx.response`: on the 200, on HEAD and on the
 * 304 of an ETag route; a cookie is never replayed by idempotency; a header HTTP cannot carry, or
 * one the framework owns, is refused (the handler's failure is a 500 without internals).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { jsonBody, send } from "./client.js"
import { bearer, tokenStrategy } from "./fixtures.js"

const memory = () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const profile = defineRestRoute({
  method: "GET",
  path: "/profile",
  output: Schema.Struct({ name: Schema.String }),
  etag: true,
  handler: (_, ctx) =>
    Effect.gen(function*() {
      yield* ctx.response.setHeader("Cache-Control", "private, max-age=60")
      yield* ctx.response.setHeader("X-Profile-Version", "3")
      yield* ctx.response.setCookie("theme", "dark", { path: "/", httpOnly: true, sameSite: "lax" })
      return { name: "alice" }
    })
})

let orders = 0
const order = defineRestRoute({
  method: "POST",
  path: "/orders",
  input: Schema.Struct({ body: Schema.Struct({ item: Schema.String }) }),
  output: Schema.Struct({ order: Schema.Number }),
  handler: (_, ctx) =>
    Effect.gen(function*() {
      orders++
      yield* ctx.response.setCookie("last-order", String(orders), { path: "/" })
      return { order: orders }
    })
})

const bad = defineRestRoute({
  method: "GET",
  path: "/bad/:which",
  input: Schema.Struct({ params: Schema.Struct({ which: Schema.String }) }),
  handler: ({ params }, ctx) =>
    Effect.as(
      params.which === "crlf"
        ? ctx.response.setHeader("X-Injected", "a\r\nSet-Cookie: stolen=1")
        : params.which === "length"
        ? ctx.response.setHeader("Content-Length", "1")
        : ctx.response.setCookie("bad name", "x"),
      { ok: true }
    )
})

const app = defineApp({ auth: [tokenStrategy], restRoutes: [profile, order, bad], idempotency: true })

describe("headers and cookies set by a REST handler", () => {
  it.scopedLive("are on the 200, on HEAD, and on the 304 of an ETag route", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory())
      const ok = yield* send(`${url}/profile`)
      assert.strictEqual(ok.status, 200)
      assert.strictEqual(ok.headers.get("cache-control"), "private, max-age=60")
      assert.strictEqual(ok.headers.get("x-profile-version"), "3")
      assert.match(ok.headers.get("set-cookie") ?? "", /^theme=dark; Path=\/; HttpOnly; SameSite=Lax$/)
      const head = yield* send(`${url}/profile`, { method: "HEAD" })
      assert.deepStrictEqual([head.status, head.headers.get("x-profile-version"), head.text], [200, "3", ""])
      assert.include(head.headers.get("set-cookie") ?? "", "theme=dark")
      const etag = ok.headers.get("etag")!
      const notModified = yield* send(`${url}/profile`, { headers: { "if-none-match": etag } })
      assert.deepStrictEqual(
        [notModified.status, notModified.headers.get("etag"), notModified.headers.get("cache-control"), notModified.headers.get("x-profile-version")],
        [304, etag, "private, max-age=60", "3"]
      )
    }))

  it.scopedLive("a cookie is sent with the first answer and never replayed by idempotency", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory())
      const request = jsonBody("POST", { item: "book" }, { ...bearer("tok-alice"), "idempotency-key": "order-1" })
      const first = yield* send(`${url}/orders`, request)
      assert.deepStrictEqual([first.status, first.headers.get("set-cookie")], [200, "last-order=1; Path=/"])
      const replay = yield* send(`${url}/orders`, request)
      assert.deepStrictEqual([replay.status, replay.headers.get("idempotency-replayed"), replay.json()], [200, "true", { order: 1 }])
      assert.isNull(replay.headers.get("set-cookie"))
      assert.strictEqual(orders, 1)
    }))

  it.scopedLive("a header HTTP cannot carry or the framework owns is refused: a 500 that leaks nothing, no header sent", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory())
      for (const which of ["crlf", "length", "cookie"]) {
        const reply = yield* send(`${url}/bad/${which}`)
        assert.strictEqual(reply.status, 500, which)
        assert.strictEqual((reply.json() as { readonly _tag: string })._tag, "InternalError", which)
        assert.isNull(reply.headers.get("x-injected"))
        assert.isNull(reply.headers.get("set-cookie"))
      }
    }))
})
