import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import type { Browser, BrowserContext } from "playwright-core"
import { ChangeTap } from "../../src/kernel/changes/ChangeTap.js"
import { Store } from "../../src/kernel/store/Store.js"
import * as PageServer from "../support/PageServer.js"
import * as Serve from "../support/Serve.js"
import { bundle } from "./bundle.js"
import { app, memory, tokens } from "./fixtures.js"
import * as Chromium from "../support/Chromium.js"

const available = Chromium.availableFor("the browser client tests")

interface PageConfig {
  readonly url: string
  readonly token?: string
}

interface PageState {
  readonly authCalls: number
  readonly whoami: string | undefined
  readonly todos: { readonly status: string; readonly error?: { readonly _tag: string; readonly status?: number } } | undefined
  readonly connection: string
  readonly addTodo: (text: string) => Promise<string>
}

type Window = { fwPage: PageConfig; fwState: PageState }

/** Opens the test page at `url` in a fresh browser context, configured with `config`. */
const openPage = (browser: Browser, url: string, config: PageConfig) =>
  Effect.gen(function*() {
    const context: BrowserContext = yield* Effect.acquireRelease(
      Effect.promise(() => browser.newContext()),
      (context) => Effect.promise(() => context.close())
    )
    const page = yield* Effect.promise(() => context.newPage())
    yield* Effect.promise(() => page.addInitScript((c) => { (globalThis as unknown as Window).fwPage = c }, config))
    yield* Effect.promise(() => page.goto(url))
    return page
  })

const todoTexts = (page: { readonly locator: (selector: string) => { readonly allTextContents: () => Promise<Array<string>> } }) =>
  Effect.promise(() => page.locator("#todos li").allTextContents())

const sharedStore = Effect.map(Layer.build(memory), (context) => Layer.succeedContext(Context.pick(Store, ChangeTap)(context)))

describe.skipIf(!available)("the browser client in headless Chromium", () => {
  // One bundle and one browser for the file (each test opens its own contexts).
  let code = ""
  let reactCode = ""
  let shared: Browser | undefined
  const launch = Effect.sync(() => {
    if (shared === undefined) throw new Error("the browser did not launch")
    return shared
  })
  beforeAll(async () => {
    code = (await bundle("test/client/page/todos.ts")).code
    reactCode = (await bundle("test/client/page/react.ts")).code
    shared = await Chromium.launch()
  })
  afterAll(() => shared?.close())

  it.scopedLive("a page calls a procedure and its live list updates after a mutation from another tab", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory, { routes: PageServer.routes(code) })
      const browser = yield* launch
      const first = yield* openPage(browser, `${served.url}/page`, { url: "/rpc", token: "tok-alice" })
      const second = yield* openPage(browser, `${served.url}/page`, { url: "/rpc", token: "tok-alice" })
      yield* Effect.promise(() => first.waitForFunction(() => (globalThis as unknown as Window).fwState.todos?.status === "live"))
      const me = yield* Effect.promise(() => first.waitForFunction(() => (globalThis as unknown as Window).fwState.whoami))
      assert.strictEqual(yield* Effect.promise(() => me.jsonValue()), "user:alice")
      const added = yield* Effect.promise(() => second.evaluate(() => (globalThis as unknown as Window).fwState.addTodo("from the other tab")))
      assert.notInclude(added, "error")
      yield* Effect.promise(() => first.waitForSelector("#todos li"))
      assert.deepStrictEqual(yield* todoTexts(first), ["from the other tab"])
    }))

  it.scopedLive("authHeaders is called again on reconnect after the server restarts, and its fresh token is used", () =>
    Effect.gen(function*() {
      const store = yield* sharedStore
      const firstRun = yield* Scope.make()
      const served = yield* Serve.serve(app, store, { routes: PageServer.routes(code) }).pipe(Scope.extend(firstRun))
      const port = Number(new URL(served.url).port)
      const browser = yield* launch
      const page = yield* openPage(browser, `${served.url}/page`, { url: "/rpc", token: "tok-rotate" })
      yield* Effect.promise(() => page.waitForFunction(() => (globalThis as unknown as Window).fwState.todos?.status === "live"))
      assert.strictEqual(yield* Effect.promise(() => page.evaluate(() => (globalThis as unknown as Window).fwState.authCalls)), 1)
      // The token rotates and the old one stops working: only a fresh resolution can authenticate.
      yield* Effect.promise(() => page.evaluate(() => { (globalThis as unknown as { fwPage: { token: string } }).fwPage.token = "tok-rotate-2" }))
      const revoked = tokens["tok-rotate"]
      yield* Effect.addFinalizer(() => Effect.sync(() => { if (revoked) tokens["tok-rotate"] = revoked }))
      delete tokens["tok-rotate"]
      // Bounded: a shutdown that never completes (seen once under full-suite load) fails with a
      // message instead of the test's timeout.
      yield* Scope.close(firstRun, Exit.void).pipe(
        Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => "the first server's shutdown did not complete in 30 s" }),
        Effect.orDie
      )
      yield* Effect.promise(() => page.waitForFunction(() => (globalThis as unknown as Window).fwState.todos?.status === "reconnecting"))
      yield* Serve.serve(app, store, { routes: PageServer.routes(code) }, port)
      yield* Effect.promise(() =>
        page.waitForFunction(() => {
          const state = (globalThis as unknown as Window).fwState
          return state.todos?.status === "live" && state.connection === "open"
        })
      )
      const authCalls = yield* Effect.promise(() => page.evaluate(() => (globalThis as unknown as Window).fwState.authCalls))
      assert.isAtLeast(authCalls, 2)
      const added = yield* Effect.promise(() => page.evaluate(() => (globalThis as unknown as Window).fwState.addTodo("after the restart")))
      assert.notInclude(added, "error")
      yield* Effect.promise(() => page.waitForSelector("#todos li"))
      assert.deepStrictEqual(yield* todoTexts(page), ["after the restart"])
    }), 120_000)

  it.scopedLive("a page on another origin without authHeaders connects anonymous", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const other = yield* PageServer.serve(code)
      assert.notStrictEqual(new URL(other.url).origin, new URL(served.url).origin)
      const browser = yield* launch
      const page = yield* openPage(browser, `${other.url}/page`, { url: served.rpcUrl })
      const me = yield* Effect.promise(() => page.waitForFunction(() => (globalThis as unknown as Window).fwState.whoami))
      assert.strictEqual(yield* Effect.promise(() => me.jsonValue()), "anonymous:anonymous")
      yield* Effect.promise(() => page.waitForFunction(() => (globalThis as unknown as Window).fwState.todos?.status === "error"))
      // The state holds the typed error (its tag and status), rendered by the page.
      assert.strictEqual(yield* Effect.promise(() => page.locator("#status").textContent()), "open error GuardRefused 401")
      const added = yield* Effect.promise(() => page.evaluate(() => (globalThis as unknown as Window).fwState.addTodo("anonymous")))
      assert.strictEqual(added, "error GuardRefused")
    }))

  it.scopedLive("React: useQuery re-renders after another tab's useMutation; a refused mutation shows its typed error", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory, { routes: PageServer.routes(reactCode) })
      const browser = yield* launch
      const viewer = yield* openPage(browser, `${served.url}/page`, { url: "/rpc", token: "tok-alice" })
      const editor = yield* openPage(browser, `${served.url}/page`, { url: "/rpc", token: "tok-alice" })
      const reader = yield* openPage(browser, `${served.url}/page`, { url: "/rpc", token: "tok-carol" })
      yield* Effect.promise(() => viewer.waitForSelector("#status:text('open live')"))
      yield* Effect.promise(() => editor.fill("#text", "typed in React"))
      yield* Effect.promise(() => editor.click("#add"))
      yield* Effect.promise(() => viewer.waitForSelector("#todos li"))
      assert.deepStrictEqual(yield* todoTexts(viewer), ["typed in React"])
      yield* Effect.promise(() => editor.waitForSelector("#todos li"))
      yield* Effect.promise(() => reader.fill("#text", "not allowed"))
      yield* Effect.promise(() => reader.click("#add"))
      yield* Effect.promise(() => reader.waitForSelector("#status:text('GuardRefused')"))
      assert.deepStrictEqual(yield* todoTexts(reader), ["typed in React"])
    }))
})
