/**
 * Spec 4.5 rule 6 on plugin HTTP routes: a route returns `PluginHttpRouteResult.byteStream(...)`,
 * the `bytes(...)` shape of REST handlers, with the same rules: the source is opened only after
 * the request passed every check (the caller's credential, the inspect gate) and never for HEAD,
 * the body is piped as the source yields it (never buffered whole) and never compressed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Stream } from "effect"
import { defineApp } from "../../src/app/App.js"
import * as Plugin from "../../src/app/Plugin.js"
import { PluginHttpRouteResult } from "../../src/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { bearer, tokenStrategy } from "./fixtures.js"

process.env.FW_INSPECT_TOKEN = "inspect-secret"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
const chunk = new Uint8Array(64 * 1024).fill(7)
const chunks = 128

describe("plugin routes: byte streams", () => {
  it.scopedLive("opened after the credential and the inspect gate, not for HEAD; never compressed", () =>
    Effect.gen(function*() {
      let opened = 0
      const download = () =>
        PluginHttpRouteResult.byteStream(() => {
          opened++
          return Stream.range(1, chunks).pipe(Stream.map(() => chunk))
        }, { contentType: "application/x-export", contentLength: chunks * chunk.length, contentDisposition: `attachment; filename="export.bin"` })
      const exporter = Plugin.definePlugin({
        name: "exporter",
        permissions: ["inspect:read"],
        routes: [{ method: "GET", path: "/exports/latest", handler: Effect.sync(download) }],
        inspectRoutes: [{ method: "GET", path: "/dump", handler: Effect.sync(download) }]
      })
      const app = defineApp({ name: "bytes", auth: [tokenStrategy], plugins: [exporter] })
      const { url } = yield* Serve.serve(app, memory)
      const inspectUrl = `${url}/_fw/inspect/plugins/exporter/dump`

      const refused = yield* Effect.promise(() => fetch(`${url}/exports/latest`, { headers: bearer("tok-bad") }))
      assert.strictEqual(refused.status, 401)
      const ungated = yield* Effect.promise(() => fetch(inspectUrl))
      assert.strictEqual(ungated.status, 401)
      const head = yield* Effect.promise(() => fetch(`${url}/exports/latest`, { method: "HEAD", headers: bearer("tok-alice") }))
      assert.strictEqual(head.status, 200)
      assert.strictEqual(head.headers.get("content-length"), String(chunks * chunk.length))
      assert.strictEqual(head.headers.get("content-type"), "application/x-export")
      assert.strictEqual(opened, 0)

      for (const [target, headers] of [[`${url}/exports/latest`, bearer("tok-alice")], [inspectUrl, { authorization: "Bearer inspect-secret" }]] as const) {
        const response = yield* Effect.promise(() => fetch(target, { headers: { ...headers, "accept-encoding": "gzip, br" } }))
        assert.strictEqual(response.status, 200)
        assert.strictEqual(response.headers.get("content-type"), "application/x-export")
        assert.strictEqual(response.headers.get("content-disposition"), `attachment; filename="export.bin"`)
        assert.strictEqual(response.headers.get("cache-control"), "no-transform")
        assert.isNull(response.headers.get("content-encoding"))
        const body = new Uint8Array(yield* Effect.promise(() => response.arrayBuffer()))
        assert.strictEqual(body.byteLength, chunks * chunk.length)
        assert.isTrue(body.every((byte) => byte === 7))
      }
      assert.strictEqual(opened, 2)
    }))

  it.scopedLive("piped: the first chunk reaches the client before the source yields the second", () =>
    Effect.gen(function*() {
      // The source waits for the client to have read its first chunk: a server that buffered the
      // body before sending it would wait forever (and the test would time out).
      const firstRead = yield* Deferred.make<void>()
      const streamer = Plugin.definePlugin({
        name: "streamer",
        permissions: [],
        routes: [{
          method: "GET",
          path: "/stream",
          anonymous: true,
          handler: Effect.succeed(PluginHttpRouteResult.byteStream(
            Stream.concat(Stream.make(new TextEncoder().encode("first;")), Stream.fromEffect(Effect.as(Deferred.await(firstRead), new TextEncoder().encode("second")))),
            { contentType: "text/plain" }
          ))
        }]
      })
      const { url } = yield* Serve.serve(defineApp({ name: "piped", plugins: [streamer] }), memory)
      const text = yield* Effect.promise(async () => {
        const response = await fetch(`${url}/stream`)
        const reader = response.body!.getReader()
        const decoder = new TextDecoder()
        let received = ""
        for (let read = await reader.read(); !read.done; read = await reader.read()) {
          received += decoder.decode(read.value, { stream: true })
          if (received === "first;") Effect.runSync(Deferred.succeed(firstRead, undefined))
        }
        return received
      })
      assert.strictEqual(text, "first;second")
    }), 20_000)
})
