/**
 * The React hooks in headless Chromium against a real server: a page re-renders when a flag is
 * toggled on the inspect surface (`useFlag`, `useVariant`, `useFlagValue`), and a search box shows
 * the hits and facet counts of the caller's tenant (`useSearch`).
 */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { Browser } from "playwright-core"
import * as Chromium from "../support/Chromium.js"
import * as Serve from "../support/Serve.js"
import { bundle } from "./bundle.js"
import { hooksApp, memory, seedNotes, toggleFlag } from "./fixtures.js"

const available = Chromium.availableFor("the React hooks browser test")

const inspectToken = "client-hooks-browser-token"
process.env.FW_INSPECT_TOKEN = inspectToken

const html = `<!doctype html><html><body><script type="module" src="/page.js"></script></body></html>`

const pageRoutes = (code: string) =>
  Layer.mergeAll(
    HttpLayerRouter.add("GET", "/page", HttpServerResponse.html(html)),
    HttpLayerRouter.add("GET", "/page.js", HttpServerResponse.text(code, { contentType: "text/javascript" }))
  )

const toggle = (url: string, flag: string) => toggleFlag(url, flag, inspectToken)

describe.skipIf(!available)("React hooks in headless Chromium", () => {
  let code = ""
  let browser: Browser | undefined
  beforeAll(async () => {
    code = (await bundle("test/client/page/hooks.ts")).code
    browser = await Chromium.launch()
  })
  afterAll(() => browser?.close())

  it.scopedLive("a flag toggle re-renders the page; a search shows hits and facets of the caller's tenant", () =>
    Effect.gen(function*() {
      const store = yield* Effect.map(Layer.build(memory), (context) => Layer.succeedContext(context))
      const served = yield* Serve.serve(hooksApp().app, store, { routes: pageRoutes(code) })
      yield* seedNotes.pipe(Effect.provide(store))
      const context = yield* Effect.acquireRelease(
        Effect.promise(() => browser!.newContext()),
        (context) => Effect.promise(() => context.close())
      )
      const page = yield* Effect.promise(() => context.newPage())
      yield* Effect.promise(() => page.addInitScript((c) => { (globalThis as unknown as { fwPage: unknown }).fwPage = c }, { url: "/rpc", token: "tok-alice" }))
      yield* Effect.promise(() => page.goto(`${served.url}/page`))
      const text = (selector: string) => Effect.promise(() => page.locator(selector).textContent())
      const waitFor = (selector: string) => Effect.promise(() => page.waitForSelector(selector))

      yield* waitFor("#beta:text('beta off')")
      yield* waitFor("#variant:text('blue')")
      assert.strictEqual(yield* text("#accent"), "blue")

      assert.strictEqual(yield* toggle(served.url, "beta"), 200)
      yield* waitFor("#beta:text('beta on')")
      assert.strictEqual(yield* toggle(served.url, "theme"), 200)
      yield* waitFor("#variant:text('plain')")
      assert.strictEqual(yield* text("#accent"), "grey")

      yield* Effect.promise(() => page.fill("#q", "milk"))
      yield* Effect.promise(() => page.click("#search"))
      yield* waitFor("#search-status:text('found 2')")
      const titles = yield* Effect.promise(() => page.locator("#results li").allTextContents())
      assert.deepStrictEqual([...titles].sort(), ["milk", "milk run"])
      assert.strictEqual(yield* text("#facets"), "1:1 2:1")
    }), 60_000)
})
