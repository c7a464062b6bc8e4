import { HttpRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import * as NodeServer from "../../src/server/NodeServer.js"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer } from "effect"
import type { AddressInfo } from "node:net"
import * as BootServer from "../../src/server/BootServer.js"

describe("BootServer", () => {
  it.scopedLive("answers 503 while the routes are being built, then steps aside for the app's handler", () =>
    Effect.gen(function*() {
      let server: ReturnType<typeof BootServer.createServer> | undefined
      const create = () => (server = BootServer.createServer())
      const routesMayBuild = yield* Deferred.make<void>()
      // The route layer waits (as a store or a plugin boots): the listener is up meanwhile.
      const app = Layer.unwrapEffect(
        Effect.as(
          Deferred.await(routesMayBuild),
          HttpServer.serve(HttpRouter.empty.pipe(HttpRouter.get("/hello", HttpServerResponse.text("hello"))))
        )
      )
      const url = () => `http://127.0.0.1:${(server!.address() as AddressInfo).port}/hello`
      yield* Layer.launch(app.pipe(Layer.provide(NodeServer.layer(create, { port: 0, host: "127.0.0.1" })))).pipe(Effect.forkScoped)
      while (server?.listening !== true) yield* Effect.sleep("10 millis")

      const early = yield* Effect.promise(() => fetch(url(), { signal: AbortSignal.timeout(5_000) }))
      assert.strictEqual(early.status, 503)
      assert.strictEqual(early.headers.get("retry-after"), "1")
      assert.deepStrictEqual(yield* Effect.promise(() => early.json()), {
        _tag: "ServerStarting",
        message: "the server is starting: retry shortly"
      })

      yield* Deferred.succeed(routesMayBuild, undefined)
      while (server!.listenerCount("request") !== 1 || (yield* Effect.promise(() => fetch(url()))).status !== 200) {
        yield* Effect.sleep("10 millis")
      }
      const ready = yield* Effect.promise(() => fetch(url()))
      assert.strictEqual(yield* Effect.promise(() => ready.text()), "hello")
      assert.strictEqual(server!.listenerCount("request"), 1)
    }))
})
