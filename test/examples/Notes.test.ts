/**
 * The notes example (examples/notes) in headless Chromium, against the real example server: the
 * process `npm run example:notes` starts (tsx on server.ts, its page bundled by esbuild at start)
 * on a fresh SQLite file. A visitor signs up; the page logs in with a password, its live list
 * (bodies included) updates after another tab's mutation, the search box highlights matches (built
 * as text and `<mark>` nodes: markup in a note stays text) and facets, the tenant's word count (an
 * aggregate) follows each write, an expectation turns violated and recovers, the flag-gated feature
 * appears when the flag is toggled on the dashboard, and the page reconnects after the server
 * restarts; a page on another origin without `authHeaders` connects anonymous. With `FW_SCREENSHOTS` set
 * (`npm run screenshots`) the run writes docs/screenshots/notes-example.png.
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
import * as Screenshots from "../support/Screenshots.js"

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

  it.scopedLive("sign-up and login, bodies in a live list across tabs and tenants, highlighted search with facets, the aggregate and the expectation, a flag toggled on the dashboard, a restart", () =>
    Effect.gen(function*() {
      // Sign-up: a new user in a workspace of their own, signed in at once; the address is then taken.
      const danaContext = yield* context
      const dana = yield* promise(() => danaContext.newPage())
      yield* promise(async () => {
        await dana.goto(`${url}/`)
        await dana.fill("#signup-name", "Dana")
        await dana.fill("#signup-email", "dana@initech.test")
        await dana.fill("#signup-password", "short")
        await dana.click("#signup button[type=submit]")
        // Too short: refused by the browser (minLength) before any request; the server refuses it too.
        await dana.fill("#signup-password", "dana-password")
        await dana.click("#signup button[type=submit]")
        await dana.waitForSelector("#who")
        await dana.waitForSelector("#words:text-is('0')")
      })
      assert.match((yield* promise(() => dana.locator("#who").textContent())) ?? "", /^Dana \(ws-[0-9a-f]{12}\)/)
      const again = yield* promise(() =>
        dana.evaluate(async () => {
          const response = await fetch("/signup", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ name: "Dana", email: "DANA@initech.test", password: "another-password" })
          })
          return { status: response.status, body: await response.json() as { _tag: string } }
        })
      )
      assert.deepStrictEqual([again.status, again.body._tag], [409, "EmailTaken"])
      const tooShort = yield* promise(() =>
        dana.evaluate(async () =>
          (await fetch("/signup", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ name: "Eve", email: "eve@initech.test", password: "short" })
          })).status
        )
      )
      assert.strictEqual(tooShort, 400)

      const alice = yield* context
      const first = yield* promise(() => alice.newPage())
      // The page runs under its strict policy: anything it blocked would be reported here.
      const blocked: Array<string> = []
      first.on("console", (message) => {
        if (message.text().includes("Content Security Policy")) blocked.push(message.text())
      })
      // A wrong password is refused on the page; the right one signs in.
      yield* promise(() => first.goto(`${url}/`))
      yield* promise(() => first.fill("#email", "alice@acme.test"))
      yield* promise(() => first.fill("#password", "wrong"))
      yield* promise(() => first.click("#login button[type=submit]"))
      yield* promise(() => first.waitForSelector("#login-error:text('wrong email or password')"))
      yield* signIn(first, "alice@acme.test", "alice-password")
      assert.include((yield* promise(() => first.locator("#who").textContent())) ?? "", "Alice (acme)")
      // The stylesheet is a file of the page's origin, and it applied.
      const ground = yield* promise(() => first.evaluate(() => getComputedStyle(document.body).backgroundColor))
      assert.strictEqual(ground, "rgb(245, 246, 248)")

      // Another tab of the same session adds notes; the first tab's live list shows them, bodies included.
      const second = yield* promise(() => alice.newPage())
      yield* promise(() => second.goto(`${url}/`))
      yield* promise(() => second.waitForSelector("#who"))
      yield* addNote(second, "Plan the garden", "tomatoes and beans", "idea")
      yield* addNote(second, "Plan the trip", "trains to the coast", "todo")
      yield* addNote(second, "Garden soil notes", "clay, lime", "reference")
      yield* promise(() => first.waitForFunction(() => document.querySelectorAll("#notes li").length === 3))
      assert.deepStrictEqual(yield* titles(first, "#notes"), ["Garden soil notes", "Plan the trip", "Plan the garden"])
      assert.deepStrictEqual(yield* promise(() => first.locator("#notes li .body").allTextContents()), ["clay, lime", "trains to the coast", "tomatoes and beans"])
      // The aggregate: the tenant's words, summed per write (3 + 4 + 2); the expectation holds.
      yield* promise(() => first.waitForSelector("#words:text-is('9')"))
      yield* promise(() => first.waitForSelector("#bodies[data-status='holding']"))

      // Another tenant sees none of them, nor their words.
      const bobContext = yield* context
      const bob = yield* promise(() => bobContext.newPage())
      yield* signIn(bob, "bob@globex.test", "bob-password")
      yield* promise(() => bob.waitForSelector("#found:text('0 found')"))
      assert.deepStrictEqual(yield* titles(bob, "#notes"), [])
      assert.strictEqual(yield* promise(() => bob.locator("#words").textContent()), "0")

      // Search: every term must match (fuzzily); facets count the matches by tag; a facet filters.
      yield* promise(() => first.fill("#search", "plan"))
      yield* promise(() => first.waitForSelector("#found:text('2 found')"))
      const facets = yield* promise(() => first.locator("#facets button").allTextContents())
      assert.deepStrictEqual([...facets].sort(), ["idea (1)", "todo (1)"])
      assert.deepStrictEqual(yield* promise(() => first.locator("#results li .title mark").allTextContents()), ["Plan", "Plan"])
      yield* promise(() => first.click("#facets button[data-tag='todo']"))
      yield* promise(() => first.waitForSelector("#found:text('1 found')"))
      assert.deepStrictEqual(yield* titles(first, "#results"), ["Plan the trip"])
      yield* promise(() => first.click("#facets button[data-tag='todo']")) // pressed again: no filter
      yield* promise(() => first.waitForSelector("#found:text('2 found')"))
      yield* promise(() => first.fill("#search", "gardn")) // one edit away
      yield* promise(() => first.waitForSelector("#results li .title:text('Garden soil notes')"))
      assert.deepStrictEqual([...(yield* titles(first, "#results"))].sort(), ["Garden soil notes", "Plan the garden"])
      // A match in the body is highlighted there.
      yield* promise(() => first.fill("#search", "tomatos"))
      yield* promise(() => first.waitForSelector("#results li .body mark:text-is('tomatoes')"))

      // Markup in a note is text, in the list and in highlighted results: nothing is parsed as HTML.
      yield* addNote(second, "<img src=x onerror=\"document.title='pwned'\"> & <b>bold</b>", "<script>document.title='pwned'</script> loam", "idea")
      yield* promise(() => first.fill("#search", "loam"))
      yield* promise(() => first.waitForSelector("#results li .body mark:text-is('loam')"))
      assert.strictEqual(yield* promise(() => first.locator("#found").textContent()), "1 found")
      assert.strictEqual(
        yield* promise(() => first.locator("#results li .title").textContent()),
        "<img src=x onerror=\"document.title='pwned'\"> & <b>bold</b>"
      )
      assert.deepStrictEqual(yield* promise(() => first.locator("#results li .body mark").allTextContents()), ["loam"])
      assert.strictEqual(yield* promise(() => first.locator("#results img, #results b, #results script, #notes img, #notes b").count()), 0)
      assert.notStrictEqual(yield* promise(() => first.title()), "pwned")
      yield* promise(() => first.waitForSelector("#words:text-is('11')"))

      // The expectation, at most a quarter of empty bodies: one of five holds, two of six violate it.
      yield* addNote(second, "Call the plumber", "", "todo")
      yield* promise(() => first.waitForFunction(() => document.querySelectorAll("#notes li").length === 5))
      yield* promise(() => first.waitForSelector("#bodies[data-status='holding']"))
      yield* addNote(second, "Buy stamps", "", "todo")
      yield* promise(() => first.waitForSelector("#bodies[data-status='violated']"))
      assert.include((yield* promise(() => first.locator("#bodies").textContent())) ?? "", "33% empty across the app, at most 25%")

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
        await dashboard.click("[data-flag='delete-notes'] button.toggle")
        await dashboard.waitForSelector("[data-flag='delete-notes'] [data-enabled='true']")
      })
      yield* promise(() => first.waitForSelector("#delete-enabled"))
      // Deleting an empty note brings the expectation back (one of five).
      yield* promise(() => first.click("#notes li:has-text('Buy stamps') button.delete"))
      yield* promise(() => second.waitForFunction(() => document.querySelectorAll("#notes li").length === 5))
      yield* promise(() => first.waitForSelector("#bodies[data-status='holding']"))
      yield* promise(() => first.click("#notes li:has-text('Plan the trip') button.delete"))
      yield* promise(() => second.waitForFunction(() => document.querySelectorAll("#notes li").length === 4))
      assert.deepStrictEqual(yield* titles(second, "#notes"), [
        "Call the plumber",
        "<img src=x onerror=\"document.title='pwned'\"> & <b>bold</b>",
        "Garden soil notes",
        "Plan the garden"
      ])
      yield* promise(() => first.waitForSelector("#words:text-is('7')"))

      // The page as a reader first sees it (docs/screenshots, linked from the example's README).
      yield* promise(async () => {
        await first.setViewportSize({ width: 1100, height: 860 })
        await first.fill("#search", "garden")
        await first.waitForSelector("#found:text('2 found')")
        await Screenshots.take(first, "notes-example")
      })
      assert.deepStrictEqual(blocked, [])

      // The server restarts on the same port and SQLite file: the page reconnects by itself, still
      // signed in (the cookie rides on the new upgrade), with its notes and the flag as they were.
      yield* promise(() => stop(server!))
      yield* promise(() => first.waitForSelector("#connection[data-status='reconnecting']"))
      server = yield* promise(() => start(port, path.join(dir, "notes.db")))
      // The page retries with backoff up to 10 s apart: on a loaded box the next try may come that
      // long after the server is back, so the wait allows for it beyond playwright's default 30 s.
      yield* promise(() => first.waitForSelector("#connection[data-status='open']", { timeout: 60_000 }))
      yield* addNote(first, "After the restart", "the words still add up", "todo")
      yield* promise(() => second.waitForFunction(() => document.querySelectorAll("#notes li").length === 5))
      assert.strictEqual((yield* titles(second, "#notes"))[0], "After the restart")
      assert.strictEqual(yield* promise(() => second.locator("button.delete").count()), 5)
      // The aggregate kept its state across the restart and counted the new note (7 + 5).
      yield* promise(() => second.waitForSelector("#words:text-is('12')"))
    }), 240_000)

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
