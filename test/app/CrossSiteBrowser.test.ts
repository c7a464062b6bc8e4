/**
 * A link on another site, clicked in headless Chromium, with a real `SameSite=Lax` session cookie
 * (issue 38, item 1). The app is served at `http://127.0.0.1:<port>`, the other site at
 * `http://localhost:<port>`: a different host that is not the same registrable domain, so the
 * browser sends `Sec-Fetch-Site: cross-site` and, on a top-level GET navigation, the Lax cookie.
 * A route that only reads answers the user; a write behind a GET does not happen.
 */
import { HttpServerResponse } from "@effect/platform"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { createServer } from "node:http"
import type { Browser, BrowserContext } from "playwright-core"
import { defineApp } from "../../src/app/App.js"
import { requireAuthenticated } from "../../src/app/Guard.js"
import * as Plugin from "../../src/app/Plugin.js"
import { query } from "../../src/app/Procedure.js"
import { issueSession, passwordSessionStrategy, sessionCookie } from "../../src/auth/Session.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Chromium from "../support/Chromium.js"
import * as Serve from "../support/Serve.js"

const available = Chromium.availableFor("the cross-site navigation browser tests")

const secret = "cross-site-browser-secret-0123456789"
const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const Notes = defineTable("xsite_notes", {
  fields: { tenantId: Schema.String, title: Schema.String, by: Schema.String },
  tenantField: "tenantId"
})

/** A read, projected as GET: a link to it from anywhere shows the user their notes. */
const list = query("notes.list", {
  input: Schema.Struct({}),
  output: Schema.Struct({ by: Schema.String, titles: Schema.Array(Schema.String) }),
  guards: [requireAuthenticated],
  publicApi: {},
  handler: (_, { store, subject }) =>
    Effect.map(store.find(Notes, {}), (rows) => ({ by: subject.id, titles: rows.map((row) => row.title) }))
})

/** A GET route that writes (what a user may declare by mistake): another site's link must not make it write. */
const quickAdd = defineRestRoute({
  method: "GET",
  path: "/notes/quickAdd",
  input: Schema.Struct({ query: Schema.Struct({ title: Schema.String }) }),
  guards: [requireAuthenticated],
  handler: ({ query: { title } }, { store, subject }) =>
    Effect.map(store.insert(Notes, { tenantId: subject.tenantId ?? "", title, by: subject.id }), (row) => ({ added: row.title }))
})

/** What the browser sent: proves the link was a cross-site top-level navigation carrying the cookie. */
const meta = defineRestRoute({
  method: "GET",
  path: "/meta",
  handler: (_, { headers }) =>
    Effect.succeed({
      site: headers["sec-fetch-site"] ?? null,
      mode: headers["sec-fetch-mode"] ?? null,
      dest: headers["sec-fetch-dest"] ?? null,
      cookie: (headers["cookie"] ?? "").includes("fw:session=")
    })
})

/** `GET /login` signs the browser in as alice: the `Set-Cookie` fw sends (HttpOnly, SameSite=Lax). */
const login = Plugin.definePlugin({
  name: "xsite-login",
  permissions: [],
  routes: [{
    method: "GET",
    path: "/login",
    anonymous: true,
    handler: Effect.map(
      issueSession(Subject.make({ type: "user", id: "alice", tenantId: "t" }), secret),
      (value) => HttpServerResponse.text("signed in", { headers: { "set-cookie": sessionCookie(value) } })
    )
  }]
})

const app = defineApp({
  name: "cross-site-browser",
  tables: [Notes],
  procedures: [list],
  restRoutes: [quickAdd, meta],
  plugins: [login],
  auth: [passwordSessionStrategy({ secret })]
})

/** A blank page served on `localhost`: another site than the app's `127.0.0.1`. */
const otherSite = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly close: () => void }>((resume) => {
    const server = createServer((_, response) => {
      response.writeHead(200, { "content-type": "text/html" })
      response.end("<!doctype html><title>another site</title><p>win a prize</p>")
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resume(Effect.succeed({ url: `http://localhost:${port}/`, close: () => server.close() }))
    })
  }),
  (server) => Effect.sync(server.close)
)

interface Followed {
  readonly status: number
  readonly body: string
}

/** Opens `page`, puts a link to `target` on it, clicks it, and reads the answer the browser got. */
const follow = (context: BrowserContext, page: string, target: string) =>
  Effect.promise(async (): Promise<Followed> => {
    const tab = await context.newPage()
    try {
      await tab.goto(page)
      await tab.evaluate((href) => {
        const link = document.createElement("a")
        link.id = "go"
        link.href = href
        link.textContent = "go"
        document.body.appendChild(link)
      }, target)
      const [response] = await Promise.all([tab.waitForResponse((r) => r.url() === target), tab.click("#go")])
      return { status: response.status(), body: await response.text() }
    } finally {
      await tab.close()
    }
  })

describe.skipIf(!available)("a link from another site in headless Chromium, with a Lax session cookie", () => {
  let browser: Browser | undefined
  beforeAll(async () => {
    browser = await Chromium.launch()
  })
  afterAll(async () => {
    await browser?.close()
  })

  it.scopedLive("a GET that writes does not write for the user; a read still answers them; from the app's own page it writes", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const other = yield* otherSite
      const context = yield* Effect.acquireRelease(Effect.promise(() => browser!.newContext()), (context) => Effect.promise(() => context.close()))
      const signedIn = yield* Effect.promise(async () => {
        const tab = await context.newPage()
        const response = await tab.goto(`${served.url}/login`)
        await tab.close()
        return response?.status()
      })
      assert.strictEqual(signedIn, 200)

      // The setting is what the issue describes: a cross-site top-level navigation that carries the cookie.
      const seen = yield* follow(context, other.url, `${served.url}/meta`)
      assert.deepStrictEqual(JSON.parse(seen.body), { site: "cross-site", mode: "navigate", dest: "document", cookie: true })

      const added = yield* follow(context, other.url, `${served.url}/notes/quickAdd?title=forged`)
      assert.strictEqual(added.status, 403)
      assert.strictEqual((JSON.parse(added.body) as { _tag: string })._tag, "StoreWriteDenied")

      // A read reached the same way answers the signed-in user: nothing was written.
      const read = yield* follow(context, other.url, `${served.url}/v1/notes/list`)
      assert.strictEqual(read.status, 200)
      assert.deepStrictEqual(JSON.parse(read.body), { by: "alice", titles: [] })

      // The same link on the app's own page (same origin) writes.
      const own = yield* follow(context, `${served.url}/meta`, `${served.url}/notes/quickAdd?title=mine`)
      assert.deepStrictEqual({ status: own.status, body: JSON.parse(own.body) }, { status: 200, body: { added: "mine" } })
      const after = yield* follow(context, other.url, `${served.url}/v1/notes/list`)
      assert.deepStrictEqual(JSON.parse(after.body), { by: "alice", titles: ["mine"] })
    }))
})
