/**
 * The React hooks in headless Chromium against a real server, with the spec's signatures under
 * `<FwProvider>` (spec 2.3, 4.2): `useFlags()` is the caller's map, `useFlag(key)` a boolean,
 * `useVariants()` the served variants, `useVariant(key)` one `{name, value, enabled}`,
 * `useFlagValue(typedFlag)` the typed value, each re-rendered when a flag is toggled on the inspect
 * surface; `useSearch(indexName)` gives `{results, facets, run, pending}` for the caller's tenant.
 * The provider-free forms (`useFlag(api, key)`, ...) show the same on the same page.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { Browser } from "playwright-core"
import * as Chromium from "../support/Chromium.js"
import * as Serve from "../support/Serve.js"
import { bundle } from "./bundle.js"
import { hooksApp, memory, seedNotes, toggleFlag } from "./fixtures.js"
import * as PageServer from "../support/PageServer.js"

const available = Chromium.availableFor("the React hooks browser test")

const inspectToken = "client-hooks-browser-token"
process.env.FW_INSPECT_TOKEN = inspectToken

const toggle = (url: string, flag: string) => toggleFlag(url, flag, inspectToken)

describe.skipIf(!available)("React hooks in headless Chromium", () => {
  let code = ""
  let browser: Browser | undefined
  beforeAll(async () => {
    code = (await bundle("test/client/page/hooks.ts")).code
    browser = await Chromium.launch()
  })
  afterAll(() => browser?.close())

  it.scopedLive("every hook under the provider: flags follow a toggle, a search shows hits and facets of the caller's tenant", () =>
    Effect.gen(function*() {
      const store = yield* Effect.map(Layer.build(memory), (context) => Layer.succeedContext(context))
      const served = yield* Serve.serve(hooksApp().app, store, { routes: PageServer.routes(code) })
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

      // Every hook under the provider, with the spec's signatures and return shapes.
      yield* waitFor("#flags:text('beta=false stable=true theme=true')")
      yield* waitFor("#variants:text('beta=off stable=on theme=blue')")
      assert.strictEqual(yield* text("#beta"), "beta off")
      assert.strictEqual(yield* text("#variant"), "blue enabled")
      assert.strictEqual(yield* text("#accent"), "blue")
      // The provider-free forms agree.
      yield* waitFor("#api-first:text('beta=false stable=true theme=true | beta off | blue | beta=off stable=on theme=blue | blue')")

      assert.strictEqual(yield* toggle(served.url, "beta"), 200)
      yield* waitFor("#beta:text('beta on')")
      yield* waitFor("#flags:text('beta=true stable=true theme=true')")
      yield* waitFor("#variants:text('beta=on stable=on theme=blue')")
      assert.strictEqual(yield* toggle(served.url, "theme"), 200)
      yield* waitFor("#variant:text('plain disabled')")
      yield* waitFor("#flags:text('beta=true stable=true theme=false')")
      yield* waitFor("#variants:text('beta=on stable=on theme=plain')")
      assert.strictEqual(yield* text("#accent"), "grey")
      yield* waitFor("#api-first:text('beta=true stable=true theme=false | beta on | plain | beta=on stable=on theme=plain | grey')")

      // useSearch(indexName): run(q) → pending, then the caller's tenant's hits and facet counts.
      yield* Effect.promise(() => page.fill("#q", "milk"))
      yield* Effect.promise(() => page.click("#search"))
      yield* waitFor("#search-status:text('found 2')")
      const titles = yield* Effect.promise(() => page.locator("#results li").allTextContents())
      assert.deepStrictEqual([...titles].sort(), ["milk", "milk run"])
      assert.strictEqual(yield* text("#facets"), "1:1 2:1")
      // run(q, {limit, offset}): the window moves, the facets still count the whole matched set.
      yield* Effect.promise(() => page.click("#page-2"))
      yield* waitFor("#search-status:text('found 1')")
      const second = yield* Effect.promise(() => page.locator("#results li").allTextContents())
      assert.strictEqual(second.length, 1)
      assert.include(["milk", "milk run"], second[0])
      assert.strictEqual(yield* text("#facets"), "1:1 2:1")
      const states = yield* Effect.promise(() => page.evaluate(() => (globalThis as unknown as { fwSearchStates: Array<string> }).fwSearchStates))
      assert.deepStrictEqual(states, ["found 0", "pending", "found 2", "pending", "found 1"])

      // The api-first form, an undeclared index: the typed search error lands in `error`.
      yield* Effect.promise(() => page.click("#search-nope"))
      yield* waitFor("#nope-status:text('SearchIndexNotFound')")
    }), 60_000)
})
