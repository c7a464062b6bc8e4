/**
 * The OpenFeature web provider in headless Chromium, through the real `@openfeature/web-sdk`, over
 * a served app: reads of the live flag set (booleans, a typed flag's object value, errors), a
 * toggle on the inspect surface emits `PROVIDER_CONFIGURATION_CHANGED` naming the flag and the
 * next read sees it, and no read counts as flag usage (spec 2.11; the flags store is SQLite).
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { Browser } from "playwright-core"
import { FlagUsage } from "../../src/flags/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { bundle } from "../client/bundle.js"
import { hooksApp, toggleFlag, tokens } from "../client/fixtures.js"
import * as Chromium from "../support/Chromium.js"
import * as Serve from "../support/Serve.js"
import * as PageServer from "../support/PageServer.js"

const available = Chromium.availableFor("the OpenFeature web provider browser test")

const inspectToken = "openfeature-web-token"
process.env.FW_INSPECT_TOKEN = inspectToken

describe.skipIf(!available)("OpenFeature web provider in headless Chromium", () => {
  let code = ""
  let browser: Browser | undefined
  beforeAll(async () => {
    const built = await bundle("test/openfeature/page/web.ts")
    code = built.code
    // The provider is browser-safe: nothing of the server or the flags area is in the page.
    assert.deepStrictEqual(built.inputs.filter((input) => /^src\/(server|flags|kernel\/store)\//.test(input)), [])
    browser = await Chromium.launch()
  })
  afterAll(() => browser?.close())

  it.scopedLive("reads the live set; a toggle emits PROVIDER_CONFIGURATION_CHANGED and the next read follows; reads are not usage", () =>
    Effect.gen(function*() {
      const { app, flags } = hooksApp({ store: "sql" })
      const store = yield* Effect.map(
        Layer.build(Store.layerSql.pipe(
          Layer.provideMerge(ChangeTap.layerLocal),
          Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply(app.tables))),
          Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })),
          Layer.orDie
        )),
        (context) => Layer.succeedContext(context)
      )
      const served = yield* Serve.serve(app, store, { routes: PageServer.routes(code) })
      const context = yield* Effect.acquireRelease(
        Effect.promise(() => browser!.newContext()),
        (context) => Effect.promise(() => context.close())
      )
      const page = yield* Effect.promise(() => context.newPage())
      yield* Effect.promise(() => page.addInitScript((c) => { (globalThis as unknown as { fwPage: unknown }).fwPage = c }, { url: "/rpc", token: "tok-alice" }))
      yield* Effect.promise(() => page.goto(`${served.url}/page`))
      yield* Effect.promise(() => page.waitForFunction(() => (globalThis as unknown as { fwReady?: boolean }).fwReady === true))
      const read = Effect.promise(() => page.evaluate(() => (globalThis as unknown as { fwRead: () => unknown }).fwRead()))
      const changes = Effect.promise(() => page.evaluate(() => (globalThis as unknown as { fwChanges: unknown }).fwChanges))

      assert.deepStrictEqual(yield* read, {
        beta: { value: false, variant: "off", reason: "CACHED", errorCode: null },
        stable: { value: true, variant: "on", reason: "CACHED", errorCode: null },
        theme: { value: { accent: "blue" }, variant: "blue", reason: "CACHED", errorCode: null },
        unknown: { value: true, variant: null, reason: "ERROR", errorCode: "FLAG_NOT_FOUND" },
        mismatch: { value: "fallback", variant: null, reason: "ERROR", errorCode: "TYPE_MISMATCH" }
      })
      assert.deepStrictEqual(yield* changes, [])

      assert.strictEqual(yield* toggleFlag(served.url, "beta", inspectToken), 200)
      yield* Effect.promise(() => page.waitForFunction(() => (globalThis as unknown as { fwChanges: Array<unknown> }).fwChanges.length > 0))
      assert.deepStrictEqual(yield* changes, [["beta"]])
      assert.deepInclude((yield* read) as Record<string, unknown>, { beta: { value: true, variant: "on", reason: "CACHED", errorCode: null } })

      // None of the page's reads counted; a server-side read does (so the check can fail).
      yield* flags.registry.flushUsage
      const usage = Effect.flatMap(Store.Store, (s) => s.find(FlagUsage)).pipe(Effect.provide(store))
      assert.deepStrictEqual(yield* usage, [])
      yield* flags.registry.isEnabled(tokens["tok-alice"]!, "beta", "isFlagEnabled")
      yield* flags.registry.flushUsage
      assert.deepStrictEqual((yield* usage).map((row) => [row.flag, row.source, row.count]), [["beta", "isFlagEnabled", 1]])
    }), 60_000)
})
