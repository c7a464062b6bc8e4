/**
 * The areas' dashboard panels in headless Chromium, against a real server on SQLite: the Flags
 * panel toggles a flag with an actor and shows the audit row it wrote; an operator signed in by
 * the app's own strategy without `canToggleFlag` (or `canInvokeProcedure`) is offered neither.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Schema } from "effect"
import type { Browser } from "playwright-core"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import { aggregatesPlugin } from "../../src/aggregates/index.js"
import { flagsPlugin } from "../../src/flags/index.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Chromium from "../support/Chromium.js"
import * as Serve from "../support/Serve.js"

const inspectToken = "panels-inspect-token"
process.env.FW_INSPECT_TOKEN = inspectToken

const available = Chromium.availableFor("the dashboard panel browser tests")

const viewer = Subject.make({ type: "user", id: "viewer", tenantId: "acme", scopes: ["fw:inspect"] })
const strategy: AuthStrategy.AuthStrategy = {
  id: "panels-test",
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.sync(() =>
      AuthStrategy.readBearer(headers) === "tok-viewer"
        ? AuthStrategy.Verdict.Authenticated({ subject: viewer })
        : AuthStrategy.Verdict.NoMatch()
    )
}

const ping = query("panels.ping", { input: Schema.Struct({}), output: Schema.String, handler: () => Effect.succeed("pong") })

const makeApp = () =>
  defineApp({
    name: "panels-test",
    tables: [],
    procedures: [ping],
    auth: strategy,
    plugins: [flagsPlugin({ store: "sql", flags: { beta: false }, usage: { track: false } }), aggregatesPlugin().plugin]
  })

const sqlite = () =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })),
    Layer.orDie
  )

describe.skipIf(!available)("the areas' dashboard panels in headless Chromium", () => {
  let browser: Browser | undefined
  beforeAll(async () => {
    browser = await Chromium.launch()
  })
  afterAll(() => browser?.close())

  const signIn = (url: string, token: string) =>
    Effect.gen(function*() {
      if (browser === undefined) return yield* Effect.dieMessage("the browser did not launch")
      const context = yield* Effect.acquireRelease(Effect.promise(() => browser!.newContext()), (c) => Effect.promise(() => c.close()))
      const page = yield* Effect.promise(() => context.newPage())
      yield* Effect.promise(() => page.goto(`${url}/_fw/dashboard`))
      yield* Effect.promise(() => page.fill("#token", token))
      yield* Effect.promise(() => page.click("#login button"))
      yield* Effect.promise(() => page.waitForSelector("#tabs button"))
      return page
    })

  it.scopedLive("the Flags panel toggles with an actor and shows the audit row; the Aggregates panel is listed", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(makeApp(), sqlite(), { applySchema: true })
      const page = yield* signIn(served.url, inspectToken)
      const tabs = yield* Effect.promise(() => page.locator("#tabs button").allTextContents())
      assert.deepStrictEqual(tabs, ["Procedures", "Live subscriptions", "Tables", "Flags", "Aggregates"])
      yield* Effect.promise(() => page.click("#tabs button[data-panel='plugin-flags']"))
      yield* Effect.promise(() => page.waitForSelector("tr[data-flag='beta'] td.enabled:text-is('false')"))
      yield* Effect.promise(() => page.fill("#flags-actor", "ops-1"))
      yield* Effect.promise(() => page.click("tr[data-flag='beta'] button.toggle"))
      yield* Effect.promise(() => page.waitForSelector("tr[data-flag='beta'] td.enabled:text-is('true')"))
      yield* Effect.promise(() => page.waitForSelector("tr[data-audit='beta']"))
      const row = yield* Effect.promise(() => page.locator("tr[data-audit='beta']").first().textContent())
      assert.include(row ?? "", "toggle")
      assert.include(row ?? "", "ops-1")
      // The audit row is the server's, not the page's.
      const audit = yield* Effect.promise(() =>
        fetch(`${served.url}/_fw/inspect/plugins/flags/audit?flag=beta`, { headers: { authorization: `Bearer ${inspectToken}` } }).then((r) => r.json())
      )
      assert.deepStrictEqual((audit as { entries: Array<{ actor: string }> }).entries.map((e) => e.actor), ["ops-1"])
    }))

  it.scopedLive("an operator without canToggleFlag or canInvokeProcedure is offered neither, and the server refuses both", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(makeApp(), sqlite(), { applySchema: true })
      const page = yield* signIn(served.url, "tok-viewer")
      yield* Effect.promise(() => page.waitForSelector("#invoke-not-allowed"))
      assert.strictEqual(yield* Effect.promise(() => page.locator("#invoke").count()), 0)
      assert.include((yield* Effect.promise(() => page.locator("#who").textContent())) ?? "", "viewer (subject)")
      yield* Effect.promise(() => page.click("#tabs button[data-panel='plugin-flags']"))
      yield* Effect.promise(() => page.waitForSelector("#flags-read-only"))
      yield* Effect.promise(() => page.waitForSelector("tr[data-flag='beta']"))
      assert.strictEqual(yield* Effect.promise(() => page.locator("button.toggle").count()), 0)
      const direct = yield* Effect.promise(() =>
        fetch(`${served.url}/_fw/inspect/plugins/flags/toggle`, {
          method: "POST",
          headers: { authorization: "Bearer tok-viewer", "content-type": "application/json" },
          body: JSON.stringify({ flag: "beta" })
        })
      )
      assert.strictEqual(direct.status, 403)
    }))
})
