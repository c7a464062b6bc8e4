import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Queue, Schedule, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import * as AuthStrategy from "../../src/auth/AuthStrategy.js"
import { sseFrame } from "../../src/http/Sse.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { bearer, Notes } from "../app/fixtures.js"
import * as Serve from "../support/Serve.js"

process.env.FW_INSPECT_TOKEN = "inspect-secret"

const revoked = new Set<string>()
const subjects: Record<string, Subject.Subject> = {
  "tok-alice": Subject.make({ type: "user", id: "alice", tenantId: "acme" }),
  "tok-bob": Subject.make({ type: "user", id: "bob", tenantId: "globex" })
}
const revocable: AuthStrategy.AuthStrategy = {
  id: "revocable",
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.sync(() => {
      const token = AuthStrategy.readBearer(headers)
      if (token === undefined) return AuthStrategy.Verdict.NoMatch()
      const subject = subjects[token]
      return subject === undefined || revoked.has(token)
        ? AuthStrategy.Verdict.Failed({ reason: "token revoked" })
        : AuthStrategy.Verdict.Authenticated({ subject })
    })
}

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
const app = defineApp({ name: "sse", tables: [Notes], procedures: [liveNotes, addNote], auth: [revocable] })
const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

interface Event {
  readonly event: string
  readonly data: string
}

/** Reads server-sent events as an EventSource would (comments and `retry:` skipped). */
const subscribe = (url: string, token: string) =>
  Effect.gen(function*() {
    const events = yield* Queue.unbounded<Event>()
    const controller = new AbortController()
    yield* Effect.addFinalizer(() => Effect.sync(() => controller.abort()))
    const response = yield* Effect.promise(() => fetch(url, { headers: bearer(token), signal: controller.signal }))
    assert.strictEqual(response.headers.get("content-type"), "text/event-stream")
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    yield* Effect.promise(async () => {
      try {
        while (true) {
          const { done, value } = await reader.read()
          if (done) break
          buffer += decoder.decode(value, { stream: true })
          let cut: number
          while ((cut = buffer.indexOf("\n\n")) !== -1) {
            const block = buffer.slice(0, cut)
            buffer = buffer.slice(cut + 2)
            const lines = block.split("\n")
            const event = lines.find((l) => l.startsWith("event: "))?.slice(7)
            if (event === undefined) continue
            const data = lines.filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n")
            Queue.unsafeOffer(events, { event, data })
          }
        }
      } catch {
        // aborted by the test
      }
      Queue.unsafeOffer(events, { event: "closed", data: "" })
    }).pipe(Effect.forkScoped)
    return { next: Queue.take(events), abort: Effect.sync(() => controller.abort()) }
  })

const post = (url: string, text: string, token: string) =>
  Effect.promise(() =>
    fetch(`${url}/v1/notes/add`, { method: "POST", headers: { "content-type": "application/json", ...bearer(token) }, body: JSON.stringify({ text }) })
  )

const liveCount = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/_fw/inspect/live`, { headers: { authorization: "Bearer inspect-secret" } })
    return ((await response.json()) as { subscriptions: number }).subscriptions
  })

describe("SSE", () => {
  it("frames split embedded newlines across data lines", () => {
    assert.strictEqual(sseFrame("note", "a\nb"), "event: note\ndata: a\ndata: b\n\n")
    assert.strictEqual(sseFrame("n", { x: 1 }), `event: n\ndata: {"x":1}\n\n`)
  })

  it.scopedLive("a projected live query: snapshot, deltas for the caller's tenant only, error on revocation, teardown on disconnect", () =>
    Effect.gen(function*() {
      revoked.clear()
      const served = yield* Serve.serve(app, memory)
      const alice = yield* subscribe(`${served.url}/v1/notes/stream`, "tok-alice")
      assert.deepStrictEqual(yield* alice.next, { event: "snapshot", data: `{"data":[]}` })
      yield* post(served.url, "globex only", "tok-bob")
      yield* post(served.url, "hello", "tok-alice")
      assert.deepStrictEqual(yield* alice.next, { event: "delta", data: `{"data":[{"text":"hello"}]}` })
      const bob = yield* subscribe(`${served.url}/v1/notes/stream`, "tok-bob")
      assert.strictEqual((yield* bob.next).event, "snapshot")
      // Revoke alice; the next acme commit makes her stream re-resolve her: refused, an error event, the end.
      revoked.add("tok-alice")
      yield* Effect.promise(() =>
        fetch(`${served.url}/_fw/inspect/invoke`, {
          method: "POST",
          headers: { authorization: "Bearer inspect-secret", "content-type": "application/json" },
          body: JSON.stringify({ tag: "notes.add", input: { text: "acme system write" }, tenantId: "acme" })
        })
      )
      const refused = yield* alice.next
      assert.strictEqual(refused.event, "error")
      assert.include(refused.data, "Unauthenticated")
      assert.strictEqual((yield* alice.next).event, "closed")
      // Disconnecting bob frees his subscription.
      yield* bob.abort
      const count = yield* liveCount(served.url).pipe(
        Effect.filterOrFail((n) => n === 0),
        Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 250 }),
        Effect.orElse(() => liveCount(served.url))
      )
      assert.strictEqual(count, 0)
    }))
})
