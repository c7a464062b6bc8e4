import { HttpApp, HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Ref, Stream } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { app } from "../app/fixtures.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const request = (url: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

/**
 * `Serve.serve` runs on `NodeServer` (fw's Node adapter): these are the parts of the platform's
 * request contract its lean path re-implements (the rest of the suite covers routes at large).
 */
describe("NodeServer, fw's Node adapter", () => {
  it.scopedLive("a route's scope closes after the answer, and only then; an unused scope costs nothing and breaks nothing", () =>
    Effect.gen(function*() {
      const finalized = yield* Ref.make<ReadonlyArray<string>>([])
      const routes = HttpLayerRouter.use((router) =>
        Effect.all([
          router.add("GET", "/scoped", Effect.gen(function*() {
            yield* Effect.addFinalizer((exit) => Ref.update(finalized, (names) => [...names, `scoped ${exit._tag}`]))
            return HttpServerResponse.text("scoped")
          })),
          router.add("GET", "/plain", HttpServerResponse.text("plain"))
        ])
      )
      const served = yield* Serve.serve(app, memory, { routes })
      const scoped = yield* request(`${served.url}/scoped`)
      assert.strictEqual(scoped.text, "scoped")
      assert.deepStrictEqual(yield* Ref.get(finalized), ["scoped Success"])
      const plain = yield* request(`${served.url}/plain`)
      assert.strictEqual(plain.text, "plain")
      assert.deepStrictEqual(yield* Ref.get(finalized), ["scoped Success"])
    }))

  it.scopedLive("a client that goes away interrupts the handler still running for it", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const routes = HttpLayerRouter.add(
        "GET",
        "/slow",
        Effect.zipRight(Deferred.succeed(started, undefined), Effect.never).pipe(
          Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)),
          Effect.as(HttpServerResponse.empty())
        )
      )
      const served = yield* Serve.serve(app, memory, { routes })
      const controller = new AbortController()
      const pending = fetch(`${served.url}/slow`, { signal: controller.signal }).catch(() => "aborted")
      yield* Deferred.await(started)
      controller.abort()
      assert.strictEqual(yield* Effect.promise(() => pending), "aborted")
      yield* Deferred.await(interrupted).pipe(Effect.timeout("5 seconds"))
    }))

  it.scopedLive("HEAD gets the headers alone, cookies become Set-Cookie lines, a streamed body arrives whole, a pre-response handler applies", () =>
    Effect.gen(function*() {
      const routes = HttpLayerRouter.use((router) =>
        Effect.all([
          router.add("GET", "/cookie", HttpServerResponse.text("cookie").pipe(
            HttpServerResponse.setCookie("a", "1"),
            Effect.flatMap(HttpServerResponse.setCookie("b", "2")),
            Effect.orDie
          )),
          router.add("GET", "/stream", HttpServerResponse.stream(Stream.make("one ", "two ", "three").pipe(Stream.encodeText))),
          router.add("GET", "/decorated", Effect.zipRight(
            HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeader(response, "x-decorated", "yes"))),
            Effect.succeed(HttpServerResponse.text("decorated"))
          )),
          router.add("GET", "/who", Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
            HttpServerResponse.text(`${request.method} ${request.url} ${request.headers["x-probe"]}`)))
        ])
      )
      const served = yield* Serve.serve(app, memory, { routes })
      const head = yield* request(`${served.url}/who`, { method: "HEAD" })
      assert.strictEqual(head.status, 200)
      assert.strictEqual(head.text, "")
      const who = yield* request(`${served.url}/who?x=1`, { headers: { "x-probe": "p" } })
      assert.strictEqual(who.text, "GET /who?x=1 p")
      const cookie = yield* request(`${served.url}/cookie`)
      assert.deepStrictEqual(cookie.headers.getSetCookie().sort(), ["a=1", "b=2"])
      const stream = yield* request(`${served.url}/stream`)
      assert.strictEqual(stream.text, "one two three")
      const decorated = yield* request(`${served.url}/decorated`)
      assert.strictEqual(decorated.text, "decorated")
      assert.strictEqual(decorated.headers.get("x-decorated"), "yes")
    }))
})
