import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { defineApp } from "../../src/app/App.js"
import { issueSession, passwordSessionStrategy } from "../../src/auth/Session.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Serve from "../support/Serve.js"
import { addProjected, liveProjected, Notes } from "./fixtures.js"
import * as Chromium from "../support/Chromium.js"

const secret = "sse-browser-session-secret-0123456789"
const app = defineApp({
  name: "sse-browser",
  tables: [Notes],
  procedures: [liveProjected, addProjected],
  auth: [passwordSessionStrategy({ secret })]
})
const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const available = Chromium.availableFor("the browser EventSource test")

interface Page {
  events: Array<string>
}

describe.skipIf(!available)("SSE in headless Chromium", () => {
  it.scopedLive("EventSource (cookie session, same origin) receives the snapshot and a delta after a commit", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const session = yield* issueSession(
        Subject.make({ type: "user", id: "alice", tenantId: "acme", scopes: ["notes:read", "notes:write"] }),
        secret
      )
      const browser = yield* Effect.acquireRelease(
        Effect.promise(Chromium.launch),
        (b) => Effect.promise(() => b.close())
      )
      const context = yield* Effect.promise(() => browser.newContext())
      yield* Effect.promise(() => context.addCookies([{ name: "fw:session", value: session, url: served.url }]))
      const page = yield* Effect.promise(() => context.newPage())
      yield* Effect.promise(() => page.goto(`${served.url}/openapi.json`))
      yield* Effect.promise(() =>
        page.evaluate(() => {
          const state = globalThis as unknown as Page
          state.events = []
          const source = new EventSource("/v1/notes/feed")
          for (const name of ["snapshot", "delta", "error"]) {
            source.addEventListener(name, (event) => state.events.push(`${name} ${(event as MessageEvent).data}`))
          }
        })
      )
      const waitFor = (count: number) =>
        Effect.promise(() => page.waitForFunction((n) => (globalThis as unknown as Page).events.length >= n, count))
      yield* waitFor(1)
      const added = yield* Effect.promise(() =>
        fetch(`${served.url}/v1/notes/add`, {
          method: "POST",
          headers: { "content-type": "application/json", cookie: `fw:session=${session}` },
          body: JSON.stringify({ text: "from the test", rank: 1 })
        }).then((r) => r.json() as Promise<{ id: string }>)
      )
      yield* waitFor(2)
      const events = yield* Effect.promise(() => page.evaluate(() => (globalThis as unknown as Page).events))
      const row = { id: added.id, text: "from the test", rank: 1 }
      assert.deepStrictEqual(events, [
        `snapshot {"data":[]}`,
        `delta ${JSON.stringify({ data: [row], inserted: [row], updated: [], deleted: [] })}`
      ])
    }))
})
