import * as ExperimentalSse from "@effect/experimental/Sse"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Fiber, Layer, Schedule, Schema, Stream, TestClock } from "effect"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import * as Sse from "../../src/http/Sse.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Serve from "../support/Serve.js"
import { jsonBody, send } from "./client.js"
import { bearer, counters, makeApp, resetSubjects, subjects, tokenStrategy } from "./fixtures.js"
import * as SseClient from "./SseClient.js"

process.env.FW_INSPECT_TOKEN = "inspect-secret"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

/** A live query whose first run never finishes: a client can only disconnect during setup. */
const stuck = query("stuck.feed", {
  input: Schema.Struct({}),
  output: Schema.Array(Schema.String),
  publicApi: { stream: "sse" },
  handler: () => Effect.never
})
const base = makeApp({ idempotency: false })
const app = defineApp({
  name: "sse-test",
  tables: base.tables,
  procedures: [...base.procedures.values(), stuck],
  restRoutes: base.restRoutes,
  auth: [tokenStrategy]
})

const liveSubscriptions = (url: string) =>
  send(`${url}/_fw/inspect/live`, { headers: bearer("inspect-secret") }).pipe(
    Effect.map((reply) => (reply.json() as { readonly subscriptions: number }).subscriptions)
  )

/** Polls the server's live subscription count until it is `n` (release follows a disconnect asynchronously). */
const until = (url: string, n: number) =>
  liveSubscriptions(url).pipe(
    Effect.filterOrFail((count) => count === n),
    Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 250 }),
    Effect.orElse(() => liveSubscriptions(url))
  )

const addNote = (url: string, token: string, text: string, rank: number) =>
  send(`${url}/v1/notes/add`, jsonBody("POST", { text, rank }, bearer(token)))

const dataOf = (event: ExperimentalSse.Event) => JSON.parse(event.data) as Record<string, unknown>

describe("SSE framing", () => {
  it("sseFrame splits multi-line data, names the event, and parses back to the same data", () => {
    const frame = Sse.sseFrame("note", "line one\nline two\r\nline three\rend", "7")
    assert.strictEqual(frame, "id: 7\nevent: note\ndata: line one\ndata: line two\ndata: line three\ndata: end\n\n")
    assert.strictEqual(Sse.sseFrame("message", { a: 1 }), `data: {"a":1}\n\n`)
    assert.throws(() => Sse.sseFrame("bad\nname", 1))
    const parsed: Array<ExperimentalSse.AnyEvent> = []
    ExperimentalSse.makeParser((event) => parsed.push(event)).feed(frame)
    assert.deepStrictEqual(parsed, [{ _tag: "Event", event: "note", id: "7", data: "line one\nline two\nline three\nend" }])
  })

  it.effect("a stream starts with the retry hint and sends a keep-alive comment every 15 seconds", () =>
    Effect.gen(function*() {
      const decoder = new TextDecoder()
      const fiber = yield* Sse.body(Stream.never).pipe(Stream.take(3), Stream.runCollect, Effect.fork)
      yield* TestClock.adjust("14 seconds")
      assert.isNull(fiber.unsafePoll())
      yield* TestClock.adjust("16 seconds")
      const frames = Chunk.toReadonlyArray(yield* Fiber.join(fiber)).map((bytes) => decoder.decode(bytes))
      assert.deepStrictEqual(frames, [`retry: ${Sse.retryMillis}\n\n`, Sse.keepAliveFrame, Sse.keepAliveFrame])
    }))

  it.effect("keep-alives stop when the frames end", () =>
    Effect.gen(function*() {
      const frames = yield* Sse.body(Stream.make("a", "b")).pipe(Stream.runCollect)
      assert.strictEqual(Chunk.size(frames), 3)
    }))
})

describe("SSE over real sockets", () => {
  it.scopedLive("a projected live query: snapshot, then a delta per change of the caller's tenant only", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      const stream = yield* SseClient.open(`${url}/v1/notes/feed`, bearer("tok-alice"))
      assert.strictEqual(stream.status, 200)
      assert.strictEqual(stream.headers.get("content-type"), "text/event-stream")
      assert.strictEqual(stream.headers.get("cache-control"), "no-cache, no-transform")
      const snapshot = yield* stream.next
      assert.strictEqual(snapshot.event, "snapshot")
      assert.deepStrictEqual(dataOf(snapshot), { data: [] })
      const first = (yield* addNote(url, "tok-alice", "one", 1)).json() as { id: string }
      const delta = yield* stream.next
      assert.strictEqual(delta.event, "delta")
      assert.deepStrictEqual(dataOf(delta), { data: [{ id: first.id, text: "one", rank: 1 }], inserted: [{ id: first.id, text: "one", rank: 1 }], updated: [], deleted: [] })
      // Another tenant's commit is not seen: the next event is alice's second note.
      yield* addNote(url, "tok-bob", "globex only", 1)
      yield* addNote(url, "tok-alice", "two", 2)
      const next = yield* stream.next
      assert.deepStrictEqual((dataOf(next).data as ReadonlyArray<{ text: string }>).map((n) => n.text), ["one", "two"])
      assert.strictEqual((dataOf(next).inserted as ReadonlyArray<unknown>).length, 1)
      assert.include(stream.raw(), `retry: ${Sse.retryMillis}`)
      assert.strictEqual(next.id, "3")
    }))

  it.scopedLive("a scope revoked mid-stream ends the stream at the next event with one error event", () =>
    Effect.gen(function*() {
      yield* Effect.addFinalizer(() => Effect.sync(resetSubjects))
      const { url } = yield* Serve.serve(app, memory)
      const stream = yield* SseClient.open(`${url}/v1/notes/feed`, bearer("tok-alice"))
      assert.strictEqual((yield* stream.next).event, "snapshot")
      subjects["tok-alice"] = Subject.make({ type: "user", id: "alice", tenantId: "acme", scopes: [] })
      yield* addNote(url, "tok-root", "after revocation", 1)
      const error = yield* stream.next
      assert.strictEqual(error.event, "error")
      assert.deepStrictEqual(dataOf(error), { _tag: "GuardRefused", message: `missing scope "notes:read"` })
      yield* Deferred.await(stream.closed)
      assert.notInclude(stream.raw(), "after revocation")
      assert.strictEqual(yield* until(url, 0), 0)
    }))

  it.scopedLive("a refusal before the stream starts is a plain status, not an event", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      const refused = yield* send(`${url}/v1/notes/feed`, { headers: bearer("tok-carol") })
      assert.strictEqual(refused.status, 403)
      assert.strictEqual(refused.headers.get("content-type"), "application/json")
      const head = yield* send(`${url}/v1/notes/feed`, { method: "HEAD", headers: bearer("tok-alice") })
      assert.strictEqual(head.status, 200)
      assert.strictEqual(head.headers.get("content-type"), "text/event-stream")
      assert.strictEqual((yield* send(`${url}/v1/notes/feed`, { method: "HEAD", headers: bearer("tok-carol") })).status, 403)
      assert.strictEqual(yield* liveSubscriptions(url), 0, "HEAD opened no subscription")
    }))

  it.scopedLive("a disconnect frees the subscription, also during setup", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      yield* Effect.scoped(Effect.gen(function*() {
        const stream = yield* SseClient.open(`${url}/v1/notes/feed`, bearer("tok-alice"))
        yield* stream.next
        assert.strictEqual(yield* until(url, 1), 1)
      }))
      assert.strictEqual(yield* until(url, 0), 0)
      // The first run never finishes: headers are never sent, the client gives up.
      const controller = new AbortController()
      const pending = fetch(`${url}/v1/stuck/feed`, { headers: bearer("tok-alice"), signal: controller.signal }).catch(() => "aborted")
      assert.strictEqual(yield* until(url, 1), 1)
      controller.abort()
      assert.strictEqual(yield* Effect.promise(() => pending), "aborted")
      assert.strictEqual(yield* until(url, 0), 0)
    }))

  it.scopedLive("a hand-written sse(): framed ticks, unsubscribed on disconnect, ended by a revoked scope", () =>
    Effect.gen(function*() {
      yield* Effect.addFinalizer(() => Effect.sync(resetSubjects))
      const { url } = yield* Serve.serve(app, memory)
      const openBefore = counters.ticksOpen
      yield* Effect.scoped(Effect.gen(function*() {
        const stream = yield* SseClient.open(`${url}/ticks`, bearer("tok-alice"))
        const first = yield* stream.next
        assert.strictEqual(first.event, "tick")
        assert.deepStrictEqual(dataOf(first), { n: 0, text: "first line\nsecond line" })
        assert.include(stream.raw(), `data: {"n":0,"text":"first line\\nsecond line"}`)
        assert.deepStrictEqual(dataOf(yield* stream.next), { n: 1 })
        assert.strictEqual(counters.ticksOpen, openBefore + 1)
      }))
      yield* Effect.sync(() => counters.ticksOpen).pipe(
        Effect.filterOrFail((open) => open === openBefore),
        Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 100 })
      )
      const stream = yield* SseClient.open(`${url}/ticks`, bearer("tok-bob"))
      yield* stream.next
      subjects["tok-bob"] = Subject.make({ type: "user", id: "bob", tenantId: "globex", scopes: [] })
      let event = yield* stream.next
      while (event.event === "tick") event = yield* stream.next
      assert.strictEqual(event.event, "error")
      assert.deepStrictEqual(dataOf(event), { _tag: "GuardRefused", status: 403, message: `missing scope "notes:read"` })
      yield* Deferred.await(stream.closed)
    }))
})
