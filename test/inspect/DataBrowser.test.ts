/**
 * The data browser (`/_fw/inspect/data/*` and the dashboard's Tables panel): keyset pages walk a
 * table in the store's order (nulls included, both directions) with no offset and no read larger
 * than a page; filters by field and tenant; sorting only where an index serves it; a row's detail
 * with its history; the gate; and, in headless Chromium, the panel clicked through as an operator
 * with markup in tenant ids and rows shown as text, never as HTML.
 */
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Either, Exit, Layer, Schema, Scope } from "effect"
import type { Browser } from "playwright-core"
import { defineApp } from "../../src/app/App.js"
import { rowHistoryPlugin } from "../../src/history/index.js"
import * as DataBrowser from "../../src/inspect/DataBrowser.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Chromium from "../support/Chromium.js"
import * as Screenshots from "../support/Screenshots.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"

const inspectToken = "data-browser-token"
process.env.FW_INSPECT_TOKEN = inspectToken
const available = Chromium.availableFor("the data browser's browser test")


const Tasks = defineTable("browse_tasks", {
  fields: {
    tenantId: Schema.String,
    title: Schema.String,
    priority: Schema.NullOr(Schema.Number),
    done: Schema.Boolean,
    tags: Schema.Array(Schema.String)
  },
  tenantField: "tenantId",
  indexes: [["priority"], ["tenantId", "done"]]
})

const markupTenant = "<b>acme</b>"
const markupTitle = `<img src=x onerror="document.body.dataset.injected='yes'">`

/** 23 rows: two tenants, priorities with ties and nulls, one title of markup. */
const seed = Array.from({ length: 23 }, (_, i) => ({
  id: `t${String(i).padStart(2, "0")}`,
  tenantId: i % 3 === 0 ? markupTenant : "globex",
  title: i === 4 ? markupTitle : `task ${i}`,
  priority: i % 5 === 0 ? null : i % 4,
  done: i % 2 === 0,
  tags: i === 1 ? ["a", "b"] : []
}))

const sqlite = () =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })),
    Layer.orDie
  )
/** A store tier with the table created. */
const sqlTier = (client: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply([Tasks])).pipe(Layer.provideMerge(client))),
    Layer.orDie
  )

/** The store's own order, read whole (what the pages must add up to). */
const whole = (store: Store.StoreShape, sort: "id" | "priority", dir: "asc" | "desc", where = {}) =>
  Subject.asSystem(store.find(Tasks, { where, orderBy: sort, direction: dir })).pipe(Effect.map((rows) => rows.map((row) => row.id)))

/** Every page of a request, following `next`; each `find` the pages made is recorded. */
const walk = (store: Store.StoreShape, params: Record<string, string>) =>
  Effect.gen(function*() {
    const reads: Array<{ readonly limit?: number; readonly offset?: number }> = []
    const recording: Store.StoreShape = {
      ...store,
      find: (table, options) => {
        reads.push({ ...(options?.limit === undefined ? {} : { limit: options.limit }), ...(options?.offset === undefined ? {} : { offset: options.offset }) })
        return store.find(table, options)
      }
    }
    const ids: Array<string> = []
    let after: string | null = null
    let pages = 0
    do {
      const request = DataBrowser.pageRequest(Tasks, new URLSearchParams({ ...params, ...(after === null ? {} : { after }) }))
      if (Either.isLeft(request)) return yield* Effect.dieMessage(request.left.message)
      const page: DataBrowser.Page = yield* Subject.asSystem(DataBrowser.page(recording, Tasks, request.right))
      ids.push(...page.rows.map((row) => String(row.id)))
      after = page.next
      pages++
    } while (after !== null && pages < 100)
    return { ids, pages, reads }
  })

const tiers: ReadonlyArray<readonly [string, () => Layer.Layer<Store.Store | ChangeTap.ChangeTap>]> = [
  ["memory", () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))],
  ["SQLite", () => sqlTier(SqliteClient.layer({ filename: ":memory:" }))],
  ...(Pg.serverUrl === null ? [] : [["PostgreSQL", () => sqlTier(Pg.layerFreshClient)] as const])
]

describe("keyset pages of the data browser", () => {
  for (const [tier, layer] of tiers) {
    it.effect(`add up to the store's order in both directions, nulls included, with no offset (${tier})`, () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insertMany(Tasks, seed)
        for (const sort of ["id", "priority"] as const) {
          for (const dir of ["asc", "desc"] as const) {
            for (const limit of [1, 4, 7, 23, 50]) {
              const { ids, pages, reads } = yield* walk(store, { sort, dir, limit: String(limit) })
              assert.deepStrictEqual(ids, yield* whole(store, sort, dir), `${sort} ${dir} by ${limit}`)
              assert.strictEqual(pages, Math.max(1, Math.ceil(seed.length / limit)))
              // Every read is a bounded range read: one row past the page at most, never an offset.
              for (const read of reads) {
                assert.isUndefined(read.offset)
                assert.isAtMost(read.limit ?? Infinity, limit + 1)
              }
            }
          }
        }
        // Filters by tenant and by field narrow every page alike.
        const acme = yield* walk(store, { sort: "priority", dir: "desc", limit: "2", tenant: markupTenant, "where.done": "true" })
        assert.deepStrictEqual(acme.ids, yield* whole(store, "priority", "desc", { tenantId: markupTenant, done: true }))
        assert.isAbove(acme.ids.length, 1)
      }).pipe(Effect.provide(layer())))
  }

  it("refuses a sort no index serves, a foreign cursor and a filter that does not fit the field", () => {
    const refused = (params: Record<string, string>) => {
      const request = DataBrowser.pageRequest(Tasks, new URLSearchParams(params))
      return Either.isLeft(request) ? request.left.message : "accepted"
    }
    assert.match(refused({ sort: "title" }), /leads no index/)
    assert.match(refused({ "where.priority": "high" }), /expected a number/)
    assert.match(refused({ "where.tags": "a" }), /cannot be filtered/)
    assert.match(refused({ "where.nope": "1" }), /no field "nope"/)
    assert.match(refused({ after: "not-a-cursor" }), /not a cursor/)
    assert.match(refused({ limit: "5000" }), /limit/)
    const cursor = Buffer.from(JSON.stringify({ sort: "id", dir: "asc", value: "t01", id: "t01" })).toString("base64url")
    assert.match(refused({ sort: "priority", after: cursor }), /another sort/)
    assert.deepStrictEqual(DataBrowser.fieldsOf(Tasks).filter((f) => f.sortable).map((f) => f.name), ["id", "tenantId", "priority"])
  })
})

const app = defineApp({ name: "data-browser-test", tables: [Tasks], plugins: [rowHistoryPlugin()] })

const start = Effect.gen(function*() {
  const context = yield* Layer.build(sqlite())
  const served = yield* Serve.serve(app, Layer.succeedContext(context), { applySchema: true })
  yield* Effect.gen(function*() {
    const store = yield* Store.Store
    yield* store.insertMany(Tasks, seed)
    yield* store.update(Tasks, "t04", { done: true, priority: 3 })
    yield* store.update(Tasks, "t04", { title: `${markupTitle} (edited)` })
  }).pipe(Effect.provide(context))
  return served
})

const get = (url: string, token: string | null = inspectToken) =>
  Effect.promise(async () => {
    const response = await fetch(url, { headers: token === null ? {} : { authorization: `Bearer ${token}` } })
    return { status: response.status, body: await response.json() as Record<string, unknown> }
  })

describe("the data browser over HTTP and in headless Chromium", () => {
  let browser: Browser | undefined
  let served: Serve.Served
  const scope = Effect.runSync(Scope.make())
  beforeAll(async () => {
    served = await Effect.runPromise(Scope.extend(start, scope))
    if (available) browser = await Chromium.launch()
  })
  afterAll(async () => {
    await browser?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  it.live("lists the tables (app first, the framework's apart), pages rows, shows a row with its versions, behind the gate", () =>
    Effect.gen(function*() {
      const base = `${served.url}/_fw/inspect/data`
      assert.strictEqual((yield* get(`${base}/tables`, null)).status, 401)
      assert.strictEqual((yield* get(`${base}/tables/browse_tasks/rows`, "wrong")).status, 401)
      const { body: listing } = yield* get(`${base}/tables`)
      const tables = listing.tables as Array<{ name: string; group: string }>
      assert.strictEqual(listing.history, true)
      assert.deepStrictEqual(tables[0], { ...tables[0], name: "browse_tasks", group: "app" })
      assert.isTrue(tables.slice(1).every((t) => t.group === "framework" && t.name.startsWith("_fw_")))

      const first = yield* get(`${base}/tables/browse_tasks/rows?limit=5&tenant=${encodeURIComponent(markupTenant)}`)
      assert.strictEqual(first.status, 200)
      const rows = first.body.rows as Array<Record<string, unknown>>
      assert.deepStrictEqual(rows.map((row) => row.id), ["t00", "t03", "t06", "t09", "t12"])
      assert.deepStrictEqual(rows[0], { id: "t00", tenantId: markupTenant, title: "task 0", priority: null, done: true, tags: [] })
      const second = yield* get(`${base}/tables/browse_tasks/rows?limit=5&tenant=${encodeURIComponent(markupTenant)}&after=${first.body.next}`)
      assert.deepStrictEqual((second.body.rows as Array<{ id: string }>).map((row) => row.id), ["t15", "t18", "t21"])
      assert.strictEqual(second.body.next, null)

      assert.strictEqual((yield* get(`${base}/tables/browse_tasks/rows?sort=title`)).status, 400)
      assert.strictEqual((yield* get(`${base}/tables/nope/rows`)).status, 404)
      assert.strictEqual((yield* get(`${base}/tables/browse_tasks/rows/nope`)).status, 404)

      const detail = yield* get(`${base}/tables/browse_tasks/rows/t04`)
      assert.strictEqual(detail.status, 200)
      assert.strictEqual((detail.body.row as { title: string }).title, `${markupTitle} (edited)`)
      assert.deepStrictEqual((detail.body.versions as Array<{ version: number; op: string }>).map((v) => [v.version, v.op]), [
        [1, "insert"],
        [2, "update"],
        [3, "update"]
      ])
    }))

  it.scopedLive.skipIf(!available)("the Tables panel: groups, pages, filter by tenant, a row's detail and versions, markup shown as text", () =>
    Effect.gen(function*() {
      const context = yield* Effect.acquireRelease(Effect.promise(() => browser!.newContext({ viewport: { width: 1280, height: 900 } })), (c) =>
        Effect.promise(() => c.close()))
      const page = yield* Effect.promise(() => context.newPage())
      const step = <A>(f: () => Promise<A>) => Effect.promise(f)
      yield* step(() => page.goto(`${served.url}/_fw/dashboard#tables`))
      yield* step(() => page.fill("#token", inspectToken))
      yield* step(() => page.click("#login button"))
      yield* step(() => page.waitForSelector("tr[data-table='browse_tasks']"))
      // The framework's tables are there, folded away.
      assert.isFalse(yield* step(() => page.locator("#framework-tables").evaluate((node) => (node as HTMLDetailsElement).open)))
      assert.isFalse(yield* step(() => page.locator("tr[data-table='_fw_row_history']").isVisible()))

      // Keyboard: focus the browse button and press Enter.
      yield* step(() => page.focus("tr[data-table='browse_tasks'] button.browse"))
      yield* step(() => page.keyboard.press("Enter"))
      yield* step(() => page.waitForSelector("#data-status:has-text('page 1: 23 rows')"))
      yield* step(() => page.selectOption("#data-limit", "20"))
      yield* step(() => page.selectOption("#data-sort", "priority"))
      yield* step(() => page.selectOption("#data-dir", "desc"))
      yield* step(() => page.click("#data-query button[type='submit']"))
      yield* step(() => page.waitForSelector("#data-status:has-text('page 1: 20 rows by priority descending')"))
      yield* step(() => page.click("#data-next"))
      yield* step(() => page.waitForSelector("#data-status:has-text('page 2: 3 rows by priority descending (last page)')"))
      assert.isTrue(yield* step(() => page.locator("#data-next").isDisabled()))
      yield* step(() => page.click("#data-previous"))
      yield* step(() => page.waitForSelector("#data-status:has-text('page 1: 20 rows')"))

      // Filter by the tenant whose id is markup: shown as typed.
      yield* step(() => page.fill("#data-tenant", markupTenant))
      yield* step(() => page.click("#data-query button[type='submit']"))
      yield* step(() => page.waitForSelector("#data-status:has-text('page 1: 8 rows')"))
      const tenants = yield* step(() => page.locator("#data-rows tbody tr td:nth-child(2)").allTextContents())
      assert.deepStrictEqual([...new Set(tenants)], [markupTenant])

      // A row's detail: its fields and versions, each change spelled out.
      yield* step(() => page.fill("#data-tenant", ""))
      yield* step(() => page.selectOption("#data-filter-field", "done"))
      yield* step(() => page.fill("#data-filter-value", "true"))
      yield* step(() => page.click("#data-query button[type='submit']"))
      yield* step(() => page.click("tr[data-row='t04'] button.open-row"))
      yield* step(() => page.waitForSelector("tr[data-version='3']"))
      const changes = yield* step(() => page.locator("#data-detail td.changes").allTextContents())
      assert.strictEqual(changes.length, 3)
      assert.include(changes[1], "priority: 0 → 3")
      assert.include(changes[2], `title: ${markupTitle} → ${markupTitle} (edited)`)
      assert.include((yield* step(() => page.locator("#data-detail dl").textContent())) ?? "", `${markupTitle} (edited)`)
      // The focus moved to the detail's heading, for a keyboard or screen-reader user.
      assert.strictEqual(yield* step(() => page.evaluate(() => document.activeElement?.textContent)), "Row t04 of browse_tasks")

      // Nothing typed into a row ran or became an element.
      assert.strictEqual(yield* step(() => page.locator("main img, main b").count()), 0)
      assert.isUndefined(yield* step(() => page.evaluate(() => document.body.dataset.injected)))
      yield* step(() => Screenshots.take(page, "tables"))
    }))
})
