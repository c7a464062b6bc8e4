/**
 * The notes example (examples/notes) in headless Chromium, against the real example server: the
 * process `npm run example:notes` starts (tsx on server.ts, its page bundled by esbuild at start)
 * on a fresh SQLite file. The page logs in with a password, its live list updates after another
 * tab's mutation, the search box searches with facets, the flag-gated feature appears when the flag
 * is toggled on the dashboard, and the page reconnects after the server restarts; a page on another
 * origin without `authHeaders` connects anonymous.
 *
 * That `authHeaders` is resolved again on reconnect is proven by test/client/Browser.test.ts (the
 * example's same-origin page rides on its session cookie and has no `authHeaders`).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Browser, Page } from "playwright-core"
import * as Chromium from "../support/Chromium.js"
import * as PageServer from "../support/PageServer.js"
import { bundle } from "../client/bundle.js"

const available = Chromium.availableFor("the notes example browser tests")

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const inspectToken = "notes-example-inspect-token"

/** A port nothing listens on (the server restarts on the same one). */
const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer()
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** Starts the example as `npm run example:notes` does, and resolves once it listens. */
const start = (port: number, db: string) =>
  new Promise<ChildProcess>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [path.join(root, "node_modules/tsx/dist/cli.mjs"), "--tsconfig", "examples/notes/tsconfig.json", "examples/notes/server.ts"],
      { cwd: root, env: { ...process.env, PORT: String(port), NOTES_DB: db, FW_INSPECT_TOKEN: inspectToken }, stdio: ["ignore", "pipe", "pipe"] }
    )
    let output = ""
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes("notes: serving on")) resolve(child)
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("exit", (code) => reject(new Error(`the example exited (${code}) before listening:\n${output}`)))
  })

const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGTERM")
  })

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

describe.skipIf(!available)("the notes example in headless Chromium", () => {
  let browser: Browser | undefined
  let server: ChildProcess | undefined
  let port = 0
  let url = ""
  let dir = ""
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "fw-notes-example-"))
    port = await freePort()
    url = `http://127.0.0.1:${port}`
    ;[server, browser] = await Promise.all([start(port, path.join(dir, "notes.db")), Chromium.launch()])
  }, 120_000)
  afterAll(async () => {
    await browser?.close()
    if (server !== undefined) await stop(server)
    rmSync(dir, { recursive: true, force: true })
  })

  const context = Effect.acquireRelease(
    promise(() => browser!.newContext()),
    (context) => promise(() => context.close())
  )

  const signIn = (page: Page, email: string, password: string) =>
    promise(async () => {
      await page.goto(`${url}/`)
      await page.fill("#email", email)
      await page.fill("#password", password)
      await page.click("#login button[type=submit]")
      await page.waitForSelector("#who")
    })

  const titles = (page: Page, list: string) => promise(() => page.locator(`${list} li .title`).allTextContents())

  const addNote = (page: Page, title: string, body: string, tag: string) =>
    promise(async () => {
      await page.fill("#title", title)
      await page.fill("#body", body)
      await page.selectOption("#tag", tag)
      await page.click("#add")
    })

  it.scopedLive("login, a live list across tabs and tenants, search with facets, a flag toggled on the dashboard, a restart", () =>
    Effect.gen(function*() {
      const alice = yield* context
      const first = yield* promise(() => alice.newPage())
      // A wrong password is refused on the page; the right one signs in.
      yield* promise(() => first.goto(`${url}/`))
      yield* promise(() => first.fill("#email", "alice@acme.test"))
      yield* promise(() => first.fill("#password", "wrong"))
      yield* promise(() => first.click("#login button[type=submit]"))
      yield* promise(() => first.waitForSelector("#login-error:text('wrong email or password')"))
      yield* signIn(first, "alice@acme.test", "alice-password")
      assert.include((yield* promise(() => first.locator("#who").textContent())) ?? "", "Alice (acme)")

      // Another tab of the same session adds notes; the first tab's live list shows them.
      const second = yield* promise(() => alice.newPage())
      yield* promise(() => second.goto(`${url}/`))
      yield* promise(() => second.waitForSelector("#who"))
      yield* addNote(second, "Plan the garden", "tomatoes and beans", "idea")
      yield* addNote(second, "Plan the trip", "trains to the coast", "todo")
      yield* addNote(second, "Garden soil notes", "clay, lime", "reference")
      yield* promise(() => first.waitForFunction(() => document.querySelectorAll("#notes li").length === 3))
      assert.deepStrictEqual(yield* titles(first, "#notes"), ["Garden soil notes", "Plan the trip", "Plan the garden"])

      // Another tenant sees none of them.
      const bobContext = yield* context
      const bob = yield* promise(() => bobContext.newPage())
      yield* signIn(bob, "bob@globex.test", "bob-password")
      yield* promise(() => bob.waitForSelector("#found:text('0 found')"))
      assert.deepStrictEqual(yield* titles(bob, "#notes"), [])

      // Search: every term must match (fuzzily); facets count the matches by tag; a facet filters.
      yield* promise(() => first.fill("#search", "plan"))
      yield* promise(() => first.waitForSelector("#found:text('2 found')"))
      const facets = yield* promise(() => first.locator("#facets button").allTextContents())
      assert.deepStrictEqual([...facets].sort(), ["idea (1)", "todo (1)"])
      assert.include((yield* promise(() => first.locator("#results li").first().innerHTML())), "<mark>Plan</mark>")
      yield* promise(() => first.click("#facets button[data-tag='todo']"))
      yield* promise(() => first.waitForSelector("#found:text('1 found')"))
      assert.deepStrictEqual(yield* promise(() => first.locator("#results li").allTextContents()), ["Plan the trip"])
      yield* promise(() => first.click("#facets button[data-tag='todo']")) // pressed again: no filter
      yield* promise(() => first.waitForSelector("#found:text('2 found')"))
      yield* promise(() => first.fill("#search", "gardn")) // one edit away
      yield* promise(() => first.waitForSelector("#results li:text('Garden soil notes')"))
      assert.deepStrictEqual([...(yield* promise(() => first.locator("#results li").allTextContents()))].sort(), ["Garden soil notes", "Plan the garden"])

      // The flag-gated feature: off, no delete button; toggled on the dashboard, the page re-renders.
      assert.strictEqual(yield* promise(() => first.locator("button.delete").count()), 0)
      // Not only hidden: the server refuses the call while the flag is off (the page's own cookie).
      const refused = yield* promise(() =>
        first.evaluate(async () => {
          const response = await fetch("/rpc", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ _tag: "Request", id: "1", tag: "notes.delete", payload: { id: "any" }, headers: [] })
          })
          return response.text()
        })
      )
      assert.include(refused, "FlagDisabled")
      const ops = yield* context
      const dashboard = yield* promise(() => ops.newPage())
      yield* promise(async () => {
        await dashboard.goto(`${url}/_fw/dashboard`)
        await dashboard.fill("#token", inspectToken)
        await dashboard.click("#login button")
        await dashboard.click("#tabs button[data-panel='plugin-flags']")
        await dashboard.fill("#flags-note", "ops-1: let the team delete notes")
        await dashboard.click("tr[data-flag='delete-notes'] button.toggle")
        await dashboard.waitForSelector("tr[data-flag='delete-notes'] td.enabled:text-is('true')")
      })
      yield* promise(() => first.waitForSelector("#delete-enabled"))
      yield* promise(() => first.click("#notes li:has-text('Plan the trip') button.delete"))
      yield* promise(() => second.waitForFunction(() => document.querySelectorAll("#notes li").length === 2))
      assert.deepStrictEqual(yield* titles(second, "#notes"), ["Garden soil notes", "Plan the garden"])

      // The server restarts on the same port and SQLite file: the page reconnects by itself, still
      // signed in (the cookie rides on the new upgrade), with its notes and the flag as they were.
      yield* promise(() => stop(server!))
      yield* promise(() => first.waitForSelector("#connection:text('reconnecting')"))
      server = yield* promise(() => start(port, path.join(dir, "notes.db")))
      // The page retries with backoff up to 10 s apart: on a loaded box the next try may come that
      // long after the server is back, so the wait allows for it beyond playwright's default 30 s.
      yield* promise(() => first.waitForSelector("#connection:text('open')", { timeout: 60_000 }))
      yield* addNote(first, "After the restart", "", "todo")
      yield* promise(() => second.waitForFunction(() => document.querySelectorAll("#notes li").length === 3))
      assert.deepStrictEqual(yield* titles(second, "#notes"), ["After the restart", "Garden soil notes", "Plan the garden"])
      assert.strictEqual(yield* promise(() => second.locator("button.delete").count()), 3)
    }), 180_000)

  it.scopedLive("a page on another origin without authHeaders connects anonymous", () =>
    Effect.gen(function*() {
      const code = (yield* promise(() => bundle("test/examples/page/otherOrigin.ts"))).code
      const other = yield* PageServer.serve(code)
      assert.notStrictEqual(new URL(other.url).origin, new URL(url).origin)
      const visitor = yield* context
      const tab = yield* promise(() => visitor.newPage())
      yield* promise(() => tab.addInitScript((api) => { (globalThis as unknown as { notesApi: string }).notesApi = api }, `${url}/rpc`))
      yield* promise(() => tab.goto(`${other.url}/`))
      const result = yield* promise(() =>
        tab.waitForFunction(() => {
          const r = (globalThis as unknown as { result?: { me?: string; list?: string } }).result
          return r?.me !== undefined && r.list !== undefined ? r : undefined
        })
      )
      assert.deepStrictEqual(yield* promise(() => result.jsonValue()), { me: "anonymous", list: "error GuardRefused" })
    }))
})
