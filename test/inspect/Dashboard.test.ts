import { HttpServerResponse } from "@effect/platform"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Browser } from "playwright-core"
import { readFileSync } from "node:fs"
import { panel as aggregates } from "../../src/aggregates/dashboard.js"
import { defineApp } from "../../src/app/App.js"
import { definePlugin } from "../../src/app/Plugin.js"
import { panel as flags } from "../../src/flags/dashboard.js"
import * as DashboardAssets from "../../src/inspect/DashboardAssets.js"
import { panel as search } from "../../src/search/dashboard.js"
import { panel as standing } from "../../src/standing/dashboard.js"
import * as Serve from "../support/Serve.js"
import { listTodos } from "../client/contracts.js"
import { app, memory, mountAs, parts } from "../client/fixtures.js"
import * as Chromium from "../support/Chromium.js"

const inspectToken = "dashboard-inspect-token"
process.env.FW_INSPECT_TOKEN = inspectToken

const available = Chromium.availableFor("the dashboard browser tests")

/** A plugin with an inspect route and a dashboard panel that reads it. */
const demo = definePlugin({
  name: "demo",
  permissions: ["inspect:read"],
  inspectRoutes: [{ method: "GET", path: "/stats", handler: Effect.succeed(HttpServerResponse.unsafeJson({ documents: 3 })) }],
  dashboardPanel: {
    title: "Demo",
    module: `export default async (root, ctx) => {
      const stats = await ctx.pluginInspect("/stats")
      root.replaceChildren(ctx.el("p", { id: "demo-stats" }, "documents: " + stats.documents))
    }`
  }
})
const withPlugin = defineApp({ ...parts, name: "dashboard-test", plugins: [demo] })

describe("the inspect dashboard", () => {
  it.scopedLive("exists only while the inspect surface is enabled, and holds no data", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const page = yield* Effect.promise(() => fetch(`${served.url}/_fw/dashboard`))
      assert.strictEqual(page.status, 200)
      assert.include(page.headers.get("content-security-policy") ?? "", "connect-src 'self'")
      assert.notInclude(yield* Effect.promise(() => page.text()), "todos.")
      const panels = yield* Effect.promise(() => fetch(`${served.url}/_fw/inspect/dashboard/panels`))
      assert.strictEqual(panels.status, 401, "the panel list is gated")
      delete process.env.FW_INSPECT_TOKEN
      yield* Effect.addFinalizer(() => Effect.sync(() => { process.env.FW_INSPECT_TOKEN = inspectToken }))
      const closed = yield* Effect.promise(() => fetch(`${served.url}/_fw/dashboard`))
      assert.strictEqual(closed.status, 404)
      const script = yield* Effect.promise(() => fetch(`${served.url}/_fw/dashboard/app.js`))
      assert.strictEqual(script.status, 404)
    }))
})

describe("the dashboard's size", () => {
  it("is what docs/dashboard.md states, within 2 KiB", () => {
    const modules = [DashboardAssets.html, DashboardAssets.script, flags.module, aggregates.module, search.module, standing.module]
    const kib = modules.reduce((sum, text) => sum + Buffer.byteLength(text), 0) / 1024
    const docs = readFileSync(new URL("../../docs/dashboard.md", import.meta.url), "utf8")
    const stated = Number(/The dashboard is \*\*([\d.]+) KiB\*\*/.exec(docs)?.[1])
    assert.isAtMost(Math.abs(kib - stated), 2, `the dashboard is ${kib.toFixed(1)} KiB; docs/dashboard.md says ${stated} KiB`)
  })
})

describe.skipIf(!available)("the inspect dashboard in headless Chromium", () => {
  let browser: Browser | undefined
  beforeAll(async () => {
    browser = await Chromium.launch()
  })
  afterAll(() => browser?.close())

  const openDashboard = (url: string) =>
    Effect.gen(function*() {
      if (browser === undefined) return yield* Effect.dieMessage("the browser did not launch")
      const context = yield* Effect.acquireRelease(Effect.promise(() => browser!.newContext()), (c) => Effect.promise(() => c.close()))
      const page = yield* Effect.promise(() => context.newPage())
      const requests: Array<string> = []
      page.on("request", (request) => requests.push(request.url()))
      yield* Effect.promise(() => page.goto(`${url}/_fw/dashboard`))
      return { page, requests }
    })

  const text = (page: { readonly locator: (s: string) => { readonly textContent: () => Promise<string | null> } }, selector: string) =>
    Effect.promise(() => page.locator(selector).textContent())

  it.scopedLive("asks for the token, then shows procedures (list and invoke), live subscriptions, tables and a plugin's panel, offline", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(withPlugin, memory)
      const { page, requests } = yield* openDashboard(served.url)
      yield* Effect.promise(() => page.fill("#token", "wrong"))
      yield* Effect.promise(() => page.click("#login button"))
      yield* Effect.promise(() => page.waitForSelector("text=that token was refused"))
      yield* Effect.promise(() => page.fill("#token", inspectToken))
      yield* Effect.promise(() => page.click("#login button"))

      // Procedures: the list, an invoke as a tenant member, and a typed refusal.
      yield* Effect.promise(() => page.waitForSelector("tr[data-tag='todos.add']"))
      const tabs = yield* Effect.promise(() => page.locator("#tabs button").allTextContents())
      assert.deepStrictEqual(tabs, ["Procedures", "Live subscriptions", "Tables", "Demo"])
      yield* Effect.promise(() => page.click("tr[data-tag='whoami']"))
      yield* Effect.promise(() => page.fill("#invoke-tenant", "acme"))
      yield* Effect.promise(() => page.click("#invoke button"))
      yield* Effect.promise(() => page.waitForSelector("#invoke-result:text('system')"))
      assert.deepStrictEqual(JSON.parse((yield* text(page, "#invoke-result")) ?? ""), { type: "system", id: "inspect", tenantId: "acme" })
      yield* Effect.promise(() => page.selectOption("#invoke-tag", "todos.add"))
      yield* Effect.promise(() => page.fill("#invoke-input", `{"text": ""}`))
      yield* Effect.promise(() => page.click("#invoke button"))
      yield* Effect.promise(() => page.waitForSelector("#invoke-result.error"))
      assert.match((yield* text(page, "#invoke-result")) ?? "", /^InputInvalid \(400\)/)

      // Live subscriptions: one open from a client.
      const fw = yield* mountAs(served.rpcUrl)
      const live = fw.apis.main.live(listTodos, {})
      const stop = live.subscribe(() => undefined)
      yield* Effect.addFinalizer(() => Effect.sync(stop))
      yield* Effect.promise(() => page.click("#tabs button[data-panel='live']"))
      yield* Effect.promise(() => page.waitForSelector("#live-count:text-is('1')"))

      // Tables, then the plugin's panel reading its own inspect route.
      yield* Effect.promise(() => page.click("#tabs button[data-panel='tables']"))
      yield* Effect.promise(() => page.waitForSelector("tr[data-table='client_todos']"))
      yield* Effect.promise(() => page.click("#tabs button[data-panel='plugin-demo']"))
      yield* Effect.promise(() => page.waitForSelector("#demo-stats"))
      assert.strictEqual(yield* text(page, "#demo-stats"), "documents: 3")

      const elsewhere = requests.filter((url) => !url.startsWith(`${served.url}/`) && !url.startsWith("blob:"))
      assert.deepStrictEqual(elsewhere, [], "the dashboard loads nothing from outside the app")
    }))

  it.scopedLive("a plugin's panel does not appear when the plugin is not installed", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const { page } = yield* openDashboard(served.url)
      yield* Effect.promise(() => page.fill("#token", inspectToken))
      yield* Effect.promise(() => page.click("#login button"))
      yield* Effect.promise(() => page.waitForSelector("#tabs button"))
      const tabs = yield* Effect.promise(() => page.locator("#tabs button").allTextContents())
      assert.deepStrictEqual(tabs, ["Procedures", "Live subscriptions", "Tables"])
    }))
})
