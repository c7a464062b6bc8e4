/**
 * The dashboard panels in headless Chromium, against one real server on SQLite with every area's
 * plugin installed: each panel renders its content; a reindex started from the Search panel shows
 * its progress live to completion; the Aggregates panel describes, pages, charts and refreshes; the
 * Flags panel shows each rule and label in words and toggles a flag, audited as the operator; an operator signed in by the app's own strategy without `canToggleFlag` (or
 * `canInvokeProcedure`) is offered neither.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { SqliteClient } from "@effect/sql-sqlite-node"
import type { Context } from "effect"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import type { Browser } from "playwright-core"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import { aggregatesPlugin, defineAggregate, layerMemory } from "../../src/aggregates/index.js"
import { flagsPlugin } from "../../src/flags/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import { searchIndex, searchPlugin } from "../../src/search/index.js"
import * as Memory from "../../src/search/Memory.js"
import type { SearchBackendShape } from "../../src/search/SearchBackend.js"
import { CostEvents, defineCostBudget, defineExpectation, defineExperiment, standingPlugin } from "../../src/standing/index.js"
import * as Chromium from "../support/Chromium.js"
import * as Screenshots from "../support/Screenshots.js"
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

const Notes = defineTable("panel_notes", {
  fields: { tenantId: Schema.String, title: Schema.String },
  tenantField: "tenantId"
})
const rows = 7

/**
 * The memory engine, whose reindex waits before writing each batch while `held` is set: the test
 * looks at the panel in the middle of a reindex.
 */
const hold: { held: Promise<void> | undefined } = { held: undefined }
const memory = Memory.make()
const { rebuild } = memory
if (rebuild === undefined) throw new Error("the memory backend rebuilds into a fresh index")
const backend: SearchBackendShape = {
  ...memory,
  rebuild: (spec) =>
    Effect.map(rebuild(spec), (fresh) => ({
      ...fresh,
      upsert: (docs) => Effect.zipRight(Effect.promise(() => hold.held ?? Promise.resolve()), fresh.upsert(docs))
    }))
}

const counter = defineAggregate({
  name: "panel-counter",
  refresh: { cron: "0 3 * * *" },
  output: Schema.Struct({ n: Schema.Number }),
  build: () => [{ n: 1 }],
  bootRefresh: "sync"
})
/** A time series: ten days of sign-ups and churn (`day` a Date; a build returns rows encoded, so ISO text). */
const dayMs = 86_400_000
const daily = defineAggregate({
  name: "panel-daily",
  refresh: { cron: "0 * * * *", timezone: "America/New_York" },
  output: Schema.Struct({ day: Schema.Date, signups: Schema.Number, churned: Schema.Number }),
  build: () => Array.from({ length: 10 }, (_, i) => ({ day: new Date(Date.UTC(2026, 0, 1) + i * dayMs).toISOString(), signups: 10 + i * i, churned: i % 3 })),
  bootRefresh: "sync"
})
/** An aggregate whose next build fails while `failing.now` is set. */
const failing = { now: false }
const fragile = defineAggregate({
  name: "panel-fragile",
  refresh: "1h",
  output: Schema.Struct({ n: Schema.Number }),
  build: () => failing.now ? Effect.fail(new Error("the upstream <api> is down")) : Effect.succeed([{ n: 1 }]),
  bootRefresh: "sync"
})
const aggregates = aggregatesPlugin()

/** A flag with every step of a rule, and markup in its description. */
const markupDescription = `<script>document.body.dataset.injected = "yes"</script><b>new</b> checkout`
const checkout = {
  rollout: 25,
  rolloutBy: "tenant" as const,
  targeting: [{ tenantIds: ["acme", "globex"] }, { metadata: { plan: "pro" } }],
  variants: [{ name: "control", value: 1, weight: 1 }, { name: "treatment", value: 2, weight: 3 }],
  description: markupDescription
}

/** At most 8 notes: the 7 seeded hold; the test adds 2 and deletes them. */
const volume = defineExpectation({ name: "notes-volume", on: { table: Notes }, invariant: { kind: "rowCount", max: 8 } })
const Visits = defineTable("panel_visits", { fields: { userId: Schema.String, arm: Schema.String, converted: Schema.Boolean } })
/** 200 control units (10% convert) against 300 treatment units (15%) on an even split: a sample ratio mismatch. */
const trial = defineExperiment({
  name: "checkout-test",
  on: { table: Visits },
  subject: "userId",
  variantFrom: "arm",
  variants: [{ name: "control", weight: 1 }, { name: "treatment", weight: 1 }],
  metric: { kind: "conversionRate", column: "converted", equals: true },
  baseline: "control"
})
const visits = [
  ...Array.from({ length: 200 }, (_, i) => ({ id: `c${i}`, userId: `c${i}`, arm: "control", converted: i < 20 })),
  ...Array.from({ length: 300 }, (_, i) => ({ id: `t${i}`, userId: `t${i}`, arm: "treatment", converted: i < 45 }))
]
/** Tenants' spend under the 100-token budget (warn at 80): one of each status, one id of markup. */
const markupTenant = "<i>globex</i>"
const spend = [["acme", 85], [markupTenant, 120], ["initech", 10]] as const

const makeApp = () =>
  defineApp({
    name: "panels-test",
    tables: [Notes, Visits],
    procedures: [ping],
    auth: strategy,
    plugins: [
      flagsPlugin({ store: "sql", flags: { beta: false, legacy: true, checkout }, usage: { track: false } }),
      aggregates.plugin,
      // Batches of 2: the reindex of 7 rows reports several steps before it is done.
      searchPlugin({
        indexes: {
          "panel-notes": searchIndex(Notes, {
            index: "panel-notes",
            tenantField: "tenantId",
            map: (row) => ({ id: row.id, tenantId: row.tenantId, title: row.title })
          })
        },
        backend,
        sync: { reindexBatchSize: 2 }
      }),
      standingPlugin({
        budgets: [defineCostBudget({ name: "panel-tokens", limit: 100, unit: "tokens", warnAt: 0.8 })],
        expectations: [volume],
        experiments: [trial]
      })
    ]
  })

const sqlite = () =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })),
    Layer.orDie
  )

/** The one server of this file: the app on SQLite, its table seeded, the aggregates scheduler attached. */
const start = Effect.gen(function*() {
  const context = yield* Layer.build(sqlite())
  const served = yield* Serve.serve(makeApp(), Layer.succeedContext(context), { applySchema: true })
  yield* Layer.build(aggregates.attach.pipe(Layer.provideMerge(layerMemory([counter, daily, fragile])), Layer.provide(Layer.succeedContext(context))))
  yield* Effect.flatMap(Store.Store, (store) =>
    Effect.forEach(Array.from({ length: rows }, (_, i) => i), (i) =>
      store.insert(Notes, { id: `n${i}`, tenantId: "acme", title: `note ${i}` })).pipe(
        Effect.zipRight(store.insertMany(Visits, visits)),
        Effect.zipRight(Effect.forEach(spend, ([tenantId, amount]) =>
          store.insert(CostEvents, { tenantId, unit: "tokens", amount, subscription: null, traceId: "seed", at: Date.now() })))
      )).pipe(Effect.provide(context))
  return { served, context }
})

describe.skipIf(!available)("the areas' dashboard panels in headless Chromium", () => {
  let browser: Browser | undefined
  let served: Serve.Served
  /** The server's store: the Standing test writes through it. */
  let stores: Context.Context<Store.Store>
  const scope = Effect.runSync(Scope.make())
  beforeAll(async () => {
    browser = await Chromium.launch()
    const started = await Effect.runPromise(Scope.extend(start, scope))
    served = started.served
    stores = started.context
  })
  afterAll(async () => {
    await browser?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

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

  it.scopedLive("each panel renders its content", () =>
    Effect.gen(function*() {
      const page = yield* signIn(served.url, inspectToken)
      const tabs = yield* Effect.promise(() => page.locator("#tabs button").allTextContents())
      assert.deepStrictEqual(tabs, ["Procedures", "Live subscriptions", "Tables", "Flags", "Aggregates", "Search", "Standing"])
      const open = (panel: string, content: string) =>
        Effect.gen(function*() {
          yield* Effect.promise(() => page.click(`#tabs button[data-panel='${panel}']`))
          yield* Effect.promise(() => page.waitForSelector(`#panel-${panel} ${content}`))
          // A panel that failed shows an alert instead of its content (the SRM alarm is an alert of its own).
          assert.strictEqual(yield* Effect.promise(() => page.locator(`#panel-${panel} [role='alert']:not(.srm)`).count()), 0)
        })
      yield* open("procedures", "tr[data-tag='panels.ping']")
      yield* open("live", "#live-count:not(:text-is('…'))")
      yield* open("tables", "tr[data-table='panel_notes']")
      yield* open("plugin-flags", "[data-flag='beta']")
      yield* open("plugin-aggregates", "tr[data-aggregate='panel-counter']")
      yield* open("plugin-search", "tr[data-index='panel-notes']")
      yield* open("plugin-standing", "#standing-budgets:has-text('panel-tokens')")
      yield* Effect.promise(() => page.waitForSelector("#standing-expectations"))
      yield* Effect.promise(() => page.waitForSelector("#standing-experiments"))
    }))

  it.scopedLive("the Aggregates panel: the policy in words, meta, rows a page at a time, a chart of a time series, a refresh and its error", () =>
    Effect.gen(function*() {
      const page = yield* signIn(served.url, inspectToken)
      const step = <A>(f: () => Promise<A>) => Effect.promise(f)
      yield* step(() => page.click("#tabs button[data-panel='plugin-aggregates']"))
      yield* step(() => page.waitForSelector("tr[data-aggregate='panel-daily']"))
      assert.strictEqual(
        yield* step(() => page.locator("tr[data-aggregate='panel-daily'] td.refresh-words").textContent()),
        "every hour at :00, America/New_York"
      )
      assert.strictEqual(yield* step(() => page.locator("tr[data-aggregate='panel-counter'] td.refresh-words").textContent()), "every day at 03:00, UTC")
      assert.strictEqual(yield* step(() => page.locator("tr[data-aggregate='panel-fragile'] td.refresh-words").textContent()), "every hour")
      // No raw JSON and no bare null anywhere in the list.
      const listed = (yield* step(() => page.locator("#aggregates-list").textContent())) ?? ""
      assert.notInclude(listed, "{")
      assert.notInclude(listed, "null")

      // Opened: meta, rows, and the chart of its two numeric columns over the days.
      yield* step(() => page.click("tr[data-aggregate='panel-daily'] button.open"))
      yield* step(() => page.waitForSelector("#aggregate-chart svg[role='img']"))
      assert.deepStrictEqual(
        yield* step(() => page.locator("#aggregate-chart polyline.series").evaluateAll((lines) => lines.map((l) => [l.getAttribute("data-series"), l.getAttribute("points")!.split(" ").length]))),
        [["signups", 10], ["churned", 10]]
      )
      const described = (yield* step(() => page.locator("#aggregate-chart desc").textContent())) ?? ""
      assert.include(described, "10 points from 2026-01-01 00:00:00Z to 2026-01-10 00:00:00Z")
      assert.include(described, "signups from 10 to 91, last 91")
      assert.strictEqual(yield* step(() => page.locator("#aggregate-detail [data-aggregate-row]").count()), 10)
      assert.strictEqual(yield* step(() => page.locator("#aggregate-detail dd[data-fact='rows']").textContent()), "10")
      yield* step(() => Screenshots.take(page, "aggregates"))

      // A refresh that fails keeps the rows and shows why, as text.
      failing.now = true
      yield* Effect.addFinalizer(() => Effect.sync(() => { failing.now = false }))
      yield* step(() => page.click("tr[data-aggregate='panel-fragile'] button.open"))
      yield* step(() => page.waitForSelector("#aggregate-detail dd[data-fact='last error']:text-is('none')"))
      yield* step(() => page.click("#aggregate-detail button.refresh"))
      yield* step(() => page.waitForSelector("#aggregates-status.error"))
      const error = (yield* step(() => page.locator("#aggregate-detail dd[data-fact='last error']").textContent())) ?? ""
      assert.include(error, "the upstream <api> is down")
      assert.strictEqual(yield* step(() => page.locator("tr[data-aggregate='panel-fragile'] td.error").count()), 1)
      assert.strictEqual(yield* step(() => page.locator("#aggregate-detail [data-aggregate-row]").count()), 1, "the rows are kept")
    }))

  it.scopedLive("the Standing panel: an expectation turning violated and back with its cause, budgets as bars, an experiment's lift with its interval and the SRM alarm", () =>
    Effect.gen(function*() {
      const page = yield* signIn(served.url, inspectToken)
      const step = <A>(f: () => Promise<A>) => Effect.promise(f)
      yield* step(() => page.click("#tabs button[data-panel='plugin-standing']"))
      const volumeRow = "tr[data-expectation='notes-volume']"
      yield* step(() => page.waitForSelector(`${volumeRow} [data-status='holding']`))
      assert.strictEqual(yield* step(() => page.locator(`${volumeRow} td.metric`).textContent()), "7 rows")
      assert.strictEqual(yield* step(() => page.locator(`${volumeRow} td.threshold`).textContent()), "at most 8 rows expected")

      // Budgets: a bar per tenant against the limit and the warn line, the markup tenant as text.
      const tenants = "[data-budget='panel-tokens'] tr[data-tenant]"
      assert.deepStrictEqual(
        yield* step(() => page.locator(tenants).evaluateAll((rows) => rows.map((row) => [row.getAttribute("data-tenant"), row.querySelector("[data-status]")!.textContent]))),
        [["acme", "warn"], [markupTenant, "exceeded"], ["initech", "ok"]]
      )
      assert.strictEqual(
        yield* step(() => page.locator(`${tenants}[data-tenant='acme'] svg.bar`).getAttribute("aria-label")),
        "acme: 85 of 100 tokens, warn at 80, warn"
      )
      const widths = yield* step(() => page.locator(`${tenants}[data-tenant='acme'] svg.bar`).evaluate((bar) => ({
        spent: Number(bar.querySelector(".spent")!.getAttribute("width")),
        warn: Number(bar.querySelector(".warn-line")!.getAttribute("x1")),
        limit: Number(bar.querySelector(".limit-line")!.getAttribute("x1"))
      })))
      assert.isTrue(widths.warn < widths.spent && widths.spent < widths.limit, JSON.stringify(widths))
      assert.strictEqual(yield* step(() => page.locator("#standing-budgets i").count()), 0)

      // The experiment: exposure, metric, lift with its 95% interval, and the SRM alarm in words.
      const treatment = "[data-experiment='checkout-test'] tr[data-arm='treatment']"
      assert.deepStrictEqual(yield* step(() => page.locator(`${treatment} td`).allTextContents()).pipe(Effect.map((cells) => cells.slice(0, 4))), [
        "300 (60.0% vs 50.0%)",
        "15.0%",
        "+50.0%",
        "-8.6% to +146.2%"
      ])
      const srm = (yield* step(() => page.locator("[data-experiment='checkout-test'] p.srm").textContent())) ?? ""
      assert.match(srm, /^Sample ratio mismatch: the arms' exposures differ from the weights far more than chance allows \(χ² = 20\.00, p = /)
      assert.include(srm, "do not trust these lifts")
      assert.strictEqual(yield* step(() => page.locator("[data-experiment='checkout-test'] p.srm[role='alert']").count()), 1)

      // Two more notes: the expectation turns violated, naming the write; the panel updates by itself.
      yield* Effect.flatMap(Store.Store, (store) =>
        Effect.zipRight(store.insert(Notes, { id: "extra-1", tenantId: "acme", title: "x" }), store.insert(Notes, { id: "extra-2", tenantId: "acme", title: "y" }))
      ).pipe(Effect.provide(stores))
      yield* step(() => page.waitForSelector(`${volumeRow} [data-status='violated']`))
      assert.strictEqual(yield* step(() => page.locator(`${volumeRow} td.metric`).textContent()), "9 rows")
      assert.match((yield* step(() => page.locator(`${volumeRow} td.cause`).textContent())) ?? "", /^insert of row extra-2 in panel_notes by the system at /)
      yield* step(() => Screenshots.take(page, "standing"))
      yield* Effect.flatMap(Store.Store, (store) =>
        Effect.zipRight(store.delete(Notes, "extra-1"), store.delete(Notes, "extra-2"))
      ).pipe(Effect.provide(stores))
      yield* step(() => page.waitForSelector(`${volumeRow} [data-status='holding']`))
      assert.match((yield* step(() => page.locator(`${volumeRow} td.cause`).textContent())) ?? "", /^delete of row extra-1 in panel_notes by the system at /)
    }))

  it.scopedLive("a reindex started from the Search panel shows its progress live to completion", () =>
    Effect.gen(function*() {
      const page = yield* signIn(served.url, inspectToken)
      yield* Effect.promise(() => page.click("#tabs button[data-panel='plugin-search']"))
      yield* Effect.promise(() => page.waitForSelector("tr[data-index='panel-notes'] button.reindex"))
      // Every text the progress line shows, as it is shown (each update replaces its text node).
      yield* Effect.promise(() =>
        page.evaluate(() => {
          const seen: Array<string> = []
          ;(window as unknown as { progressSeen: Array<string> }).progressSeen = seen
          new MutationObserver((records) => {
            for (const record of records) {
              for (const node of record.addedNodes) seen.push(node.textContent ?? "")
            }
          }).observe(document.getElementById("search-progress")!, { childList: true })
        })
      )
      let release = () => {}
      hold.held = new Promise((resolve) => {
        release = resolve
      })
      // Released on any exit: a failing step leaves no reindex waiting.
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          hold.held = undefined
          release()
        })
      )
      yield* Effect.promise(() => page.click("tr[data-index='panel-notes'] button.reindex"))
      // The reindex waits at its first batch: the panel already shows where it is.
      yield* Effect.promise(() => page.waitForSelector("#search-progress[data-phase='walking']"))
      assert.strictEqual(yield* Effect.promise(() => page.locator("#search-progress").textContent()), `panel-notes: walking 0/${rows}`)
      hold.held = undefined
      release()
      yield* Effect.promise(() => page.waitForSelector("#search-progress[data-phase='done']"))
      // Once done the panel reloads the index: its last reindex counts the rows.
      yield* Effect.promise(() => page.waitForSelector(`tr[data-index='panel-notes']:has-text('(${rows} rows)')`))
      const seen = yield* Effect.promise(() => page.evaluate(() => (window as unknown as { progressSeen: Array<string> }).progressSeen))
      // Every step was shown, in order: each batch of 2, the swap, done.
      assert.deepStrictEqual(seen, [
        "starting…",
        ...[0, 2, 4, 6, 7].map((done) => `panel-notes: walking ${done}/${rows}`),
        `panel-notes: swapping ${rows}/${rows}`,
        `panel-notes: done ${rows}/${rows}`
      ])
      assert.strictEqual(yield* Effect.promise(() => page.locator("#search-progress.error").count()), 0)
      yield* Effect.promise(() => Screenshots.take(page, "search"))
    }))

  it.scopedLive("the Flags panel: each rule in words, the labels explained, markup as text, a toggle audited as the operator", () =>
    Effect.gen(function*() {
      const page = yield* signIn(served.url, inspectToken)
      const step = <A>(f: () => Promise<A>) => Effect.promise(f)
      yield* step(() => page.click("#tabs button[data-panel='plugin-flags']"))
      yield* step(() => page.waitForSelector("[data-flag='checkout'] ol.rule"))
      assert.deepStrictEqual(yield* step(() => page.locator("[data-flag='checkout'] ol.rule li").allTextContents()), [
        "Enabled.",
        `Targets callers matching any of: (1) tenant acme or globex; (2) metadata plan = "pro"; everyone else is off.`,
        "On for 25% of targeted tenants, chosen by a stable hash of the tenant id (a caller without one is off).",
        "Variants: control 25% (weight 1) and treatment 75% (weight 3)."
      ])
      // The description is text: its markup shows, nothing runs.
      assert.strictEqual(yield* step(() => page.locator("[data-flag='checkout'] p.description").textContent()), markupDescription)
      assert.strictEqual(yield* step(() => page.locator("#flags-list b, #flags-list script").count()), 0)
      assert.isUndefined(yield* step(() => page.evaluate(() => document.body.dataset.injected)))
      // An always-on flag: the label explained, and why it is a removal candidate; no stray quotes.
      assert.strictEqual(
        yield* step(() => page.locator("[data-flag='legacy'] dd.shape").textContent()),
        "always on: enabled, a full rollout, and no targeting, variants or schedule left that could change the answer"
      )
      const removal = (yield* step(() => page.locator("[data-flag='legacy'] dd.removal").textContent())) ?? ""
      assert.match(removal, /^A removal candidate: the flag no longer decides anything/)
      assert.include(removal, "Delete its definition and keep only the code path it turns on.")
      assert.notInclude((yield* step(() => page.locator("[data-flag='legacy'] h3").textContent())) ?? "", `"`)
      assert.strictEqual(yield* step(() => page.locator("[data-flag='checkout'] dd.removal").count()), 0)

      // A toggle: the note typed beside it, the operator recorded by the server.
      yield* step(() => page.waitForSelector("[data-flag='beta'] [data-enabled='false']"))
      yield* step(() => page.fill("#flags-note", "ops-1"))
      yield* step(() => page.click("[data-flag='beta'] button.toggle"))
      yield* step(() => page.waitForSelector("[data-flag='beta'] [data-enabled='true']"))
      yield* step(() => page.waitForSelector("tr[data-audit='beta']"))
      const row = yield* step(() => page.locator("tr[data-audit='beta']").first().locator("td").allTextContents())
      assert.deepStrictEqual(row.slice(1), ["beta", "toggle", "system:inspect-token", "ops-1", "enabled: false → true; override: none → enabled = true"])
      yield* step(() => Screenshots.take(page, "flags"))
      // The audit row is the server's, not the page's.
      const audit = yield* step(() =>
        fetch(`${served.url}/_fw/inspect/plugins/flags/audit?flag=beta`, { headers: { authorization: `Bearer ${inspectToken}` } }).then((r) => r.json())
      )
      // The note is what was typed; who acted is the operator the gate admitted.
      assert.deepStrictEqual(
        (audit as { entries: Array<{ note: string; operatorType: string; operatorId: string }> }).entries.map((e) => [e.note, e.operatorType, e.operatorId]),
        [["ops-1", "system", "inspect-token"]]
      )
    }))

  it.scopedLive("an operator without canToggleFlag or canInvokeProcedure is offered neither, and the server refuses both", () =>
    Effect.gen(function*() {
      const page = yield* signIn(served.url, "tok-viewer")
      yield* Effect.promise(() => page.waitForSelector("#invoke-not-allowed"))
      assert.strictEqual(yield* Effect.promise(() => page.locator("#invoke").count()), 0)
      assert.include((yield* Effect.promise(() => page.locator("#who").textContent())) ?? "", "viewer (subject)")
      yield* Effect.promise(() => page.click("#tabs button[data-panel='plugin-flags']"))
      yield* Effect.promise(() => page.waitForSelector("#flags-read-only"))
      yield* Effect.promise(() => page.waitForSelector("[data-flag='beta']"))
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
