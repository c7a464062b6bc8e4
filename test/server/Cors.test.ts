/**
 * CORS from a page on another origin, in headless Chromium: with `http.cors` the page reads a REST
 * route and `POST /rpc` (a bearer header forces a preflight); without it, or from an origin not
 * listed, the browser withholds the answers.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { createServer } from "node:http"
import type { Browser } from "playwright-core"
import { AppDefinitionError, defineApp } from "../../src/app/App.js"
import type * as App from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Chromium from "../support/Chromium.js"
import * as Serve from "../support/Serve.js"
import { tokenStrategy } from "../app/fixtures.js"

const available = Chromium.availableFor("the CORS browser tests")

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const ping = defineRestRoute({
  method: "GET",
  path: "/ping",
  output: Schema.Struct({ pong: Schema.Boolean }),
  handler: () => Effect.succeed({ pong: true })
})
const whoAmI = query("who", {
  input: Schema.Struct({}),
  output: Schema.String,
  handler: (_, { subject }) => Effect.succeed(subject.id)
})

const appWith = (cors: App.CorsOptions | undefined) =>
  defineApp({ name: "cors", restRoutes: [ping], procedures: [whoAmI], auth: tokenStrategy, ...(cors ? { http: { cors } } : {}) })

/** A blank page served on its own port: another origin than the app's. */
const pageOrigin = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly close: () => void }>((resume) => {
    const server = createServer((_, response) => {
      response.writeHead(200, { "content-type": "text/html" })
      response.end("<!doctype html><title>other origin</title>")
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resume(Effect.succeed({ url: `http://127.0.0.1:${port}`, close: () => server.close() }))
    })
  }),
  (server) => Effect.sync(server.close)
)

interface Outcome {
  readonly rest: string
  readonly rpc: string
}

/** From the page: GET /ping, and POST /rpc with a bearer token (a non-safelisted header: preflight). */
const callFrom = (browser: Browser, pageUrl: string, appUrl: string) =>
  Effect.acquireUseRelease(
    Effect.promise(() => browser.newContext()),
    (context) =>
      Effect.promise(async () => {
        const page = await context.newPage()
        await page.goto(pageUrl)
        return page.evaluate(async (base): Promise<Outcome> => {
          const attempt = async (run: () => Promise<string>) => {
            try {
              return await run()
            } catch (error) {
              return `blocked: ${String(error)}`
            }
          }
          const rest = await attempt(async () => (await fetch(`${base}/ping`)).text())
          const rpc = await attempt(async () => {
            const response = await fetch(`${base}/rpc`, {
              method: "POST",
              headers: { "content-type": "application/json", authorization: "Bearer tok-alice" },
              body: JSON.stringify({ _tag: "Request", id: "1", tag: "who", payload: {}, headers: [] })
            })
            return `${response.status} ${await response.text()}`
          })
          return { rest, rpc }
        }, appUrl)
      }),
    (context) => Effect.promise(() => context.close())
  )

describe.skipIf(!available)("CORS from another origin in headless Chromium", () => {
  let browser: Browser | undefined
  beforeAll(async () => {
    browser = await Chromium.launch()
  })
  afterAll(async () => {
    await browser?.close()
  })

  it.scopedLive("with http.cors the page reads a REST route and POST /rpc; without it, or from an unlisted origin, it cannot", () =>
    Effect.gen(function*() {
      const page = yield* pageOrigin
      const open = yield* Serve.serve(appWith({ origins: [page.url] }), memory)
      const allowed = yield* callFrom(browser!, page.url, open.url)
      assert.strictEqual(allowed.rest, JSON.stringify({ pong: true }))
      assert.match(allowed.rpc, /^200 /)
      assert.include(allowed.rpc, "\"value\":\"alice\"")

      const closed = yield* Serve.serve(appWith(undefined), memory)
      const refused = yield* callFrom(browser!, page.url, closed.url)
      assert.match(refused.rest, /^blocked: TypeError/)
      assert.match(refused.rpc, /^blocked: TypeError/)

      const elsewhere = yield* Serve.serve(appWith({ origins: ["https://app.example.com"] }), memory)
      const unlisted = yield* callFrom(browser!, page.url, elsewhere.url)
      assert.match(unlisted.rest, /^blocked: TypeError/)
      assert.match(unlisted.rpc, /^blocked: TypeError/)
    }))
})

describe("CORS answers", () => {
  it.scopedLive("a preflight from a listed origin is 204 with the allowed methods and headers; others get no CORS headers", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(appWith({ origins: ["https://app.example.com"], credentials: true, headers: ["X-Tenant"] }), memory)
      const preflight = yield* Effect.promise(() =>
        fetch(`${served.url}/rpc`, {
          method: "OPTIONS",
          headers: { origin: "https://app.example.com", "access-control-request-method": "POST", "access-control-request-headers": "authorization" }
        }))
      assert.strictEqual(preflight.status, 204)
      assert.strictEqual(preflight.headers.get("access-control-allow-origin"), "https://app.example.com")
      assert.strictEqual(preflight.headers.get("access-control-allow-credentials"), "true")
      assert.include(preflight.headers.get("access-control-allow-methods") ?? "", "POST")
      assert.include(preflight.headers.get("access-control-allow-headers") ?? "", "x-tenant")
      const other = yield* Effect.promise(() =>
        fetch(`${served.url}/rpc`, { method: "OPTIONS", headers: { origin: "https://evil.example", "access-control-request-method": "POST" } }))
      assert.strictEqual(other.status, 405)
      assert.isNull(other.headers.get("access-control-allow-origin"))
      const missing = yield* Effect.promise(() => fetch(`${served.url}/nowhere`, { headers: { origin: "https://app.example.com" } }))
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(missing.headers.get("access-control-allow-origin"), "https://app.example.com")
      assert.strictEqual(missing.headers.get("vary"), "Origin")
      const inspect = yield* Effect.promise(() => fetch(`${served.url}/_fw/health`, { headers: { origin: "https://app.example.com" } }))
      assert.isNull(inspect.headers.get("access-control-allow-origin"))
    }))

  it("bad options are refused at definition: a path in an origin, credentials with \"*\"", () => {
    assert.throws(() => appWith({ origins: ["https://app.example.com/path"] }), AppDefinitionError)
    assert.throws(() => appWith({ origins: "*", credentials: true }), AppDefinitionError)
    assert.deepStrictEqual([...appWith({ origins: ["https://a.example"], credentials: true }).trustedOrigins], ["https://a.example"])
  })
})
