import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { existsSync } from "node:fs"
import { chromium } from "playwright-core"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import { issueSession, passwordSessionStrategy } from "../../src/auth/Session.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { Notes } from "../app/fixtures.js"
import * as Serve from "../support/Serve.js"

const chromiumPath = "/usr/bin/chromium"
const secret = "sse-browser-session-secret-0123456789"

const liveNotes = query("notes.stream", {
  input: Schema.Struct({}),
  output: Schema.Array(Schema.Struct({ text: Schema.String })),
  publicApi: { stream: "sse" },
  handler: (_, { store }) => Effect.map(store.find(Notes, { orderBy: "rank" }), (notes) => notes.map((n) => ({ text: n.text })))
})
const addNote = mutation("notes.add", {
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ id: Schema.String }),
  publicApi: {},
  handler: ({ text }, { store, subject }) => Effect.map(store.insert(Notes, { tenantId: subject.tenantId!, text, rank: 1 }), (n) => ({ id: n.id }))
})
const app = defineApp({ name: "sse-browser", tables: [Notes], procedures: [liveNotes, addNote], auth: [passwordSessionStrategy({ secret })] })
const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

if (!existsSync(chromiumPath)) {
  console.warn(`[fw tests] ${chromiumPath} is not installed (apt-get install chromium): skipping the browser EventSource test`)
}

describe.skipIf(!existsSync(chromiumPath))("SSE in headless Chromium", () => {
  it.scopedLive("EventSource receives the snapshot and a delta after a commit", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const session = yield* issueSession(Subject.make({ type: "user", id: "alice", tenantId: "acme" }), secret)
      const browser = yield* Effect.acquireRelease(
        Effect.promise(() =>
          chromium.launch({
            executablePath: chromiumPath,
            args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
          })
        ),
        (b) => Effect.promise(() => b.close())
      )
      const context = yield* Effect.promise(() => browser.newContext())
      yield* Effect.promise(() => context.addCookies([{ name: "fw:session", value: session, url: served.url }]))
      const page = yield* Effect.promise(() => context.newPage())
      yield* Effect.promise(() => page.goto(`${served.url}/_fw/health`))
      yield* Effect.promise(() =>
        page.evaluate(() => {
          const events: Array<string> = []
          ;(globalThis as unknown as { events: Array<string> }).events = events
          const source = new EventSource("/v1/notes/stream")
          for (const name of ["snapshot", "delta", "error"]) {
            source.addEventListener(name, (event) => events.push(`${name} ${(event as MessageEvent).data}`))
          }
        })
      )
      const eventsSoFar = () => Effect.promise(() => page.evaluate(() => (globalThis as unknown as { events: Array<string> }).events))
      const waitFor = (count: number) =>
        Effect.promise(() => page.waitForFunction((n) => (globalThis as unknown as { events: Array<string> }).events.length >= n, count))
      yield* waitFor(1)
      yield* Effect.promise(() =>
        fetch(`${served.url}/v1/notes/add`, {
          method: "POST",
          headers: { "content-type": "application/json", cookie: `fw:session=${session}` },
          body: JSON.stringify({ text: "from the test" })
        })
      )
      yield* waitFor(2)
      assert.deepStrictEqual(yield* eventsSoFar(), [`snapshot {"data":[]}`, `delta {"data":[{"text":"from the test"}]}`])
    }))
})
