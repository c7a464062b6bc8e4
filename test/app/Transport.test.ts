import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Effect, Either, Exit, Layer, Queue, Schedule, Stream } from "effect"
import * as Client from "../../src/client/Client.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { addNote, app, bearer, listNotes, Notes, whoAmI } from "./fixtures.js"

process.env.FW_INSPECT_TOKEN = "inspect-secret"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

/** Subscribes to a live query; the first result is taken, so the subscription is active on return. */
const subscribe = <A, E>(stream: Stream.Stream<A, E>) =>
  Effect.gen(function*() {
    const results = yield* Queue.unbounded<A>()
    yield* stream.pipe(Stream.runForEach((a) => Queue.offer(results, a)), Effect.forkScoped)
    return { first: yield* Queue.take(results), next: Queue.take(results) }
  })

const liveSubscriptions = (served: Serve.Served) =>
  HttpClient.HttpClient.pipe(
    Effect.flatMap((client) =>
      client.execute(
        HttpClientRequest.get(`${served.url}/_fw/inspect/live`).pipe(HttpClientRequest.bearerToken("inspect-secret"))
      )
    ),
    Effect.flatMap((response) => response.json),
    Effect.map((body) => (body as { readonly subscriptions: number }).subscriptions),
    Effect.provide(FetchHttpClient.layer)
  )

describe("transports", () => {
  it.scopedLive("the same procedure over POST /rpc and WebSocket, tenant-scoped", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const http = yield* Serve.httpClient(served, app)
      const ws = yield* Serve.wsClient(served, app)
      yield* http.call(addNote, { text: "acme over http", rank: 1 }, { headers: bearer("tok-alice") })
      yield* ws.call(addNote, { text: "acme over ws", rank: 2 }, { headers: bearer("tok-alice") })
      yield* ws.call(addNote, { text: "globex over ws", rank: 3 }, { headers: bearer("tok-bob") })
      const acmeHttp = yield* http.call(listNotes, {}, { headers: bearer("tok-alice") })
      const acmeWs = yield* ws.call(listNotes, {}, { headers: bearer("tok-alice") })
      const globex = yield* http.call(listNotes, {}, { headers: bearer("tok-bob") })
      assert.deepStrictEqual(acmeHttp.map((n) => n.text), ["acme over http", "acme over ws"])
      assert.deepStrictEqual(acmeWs, acmeHttp)
      assert.deepStrictEqual(globex.map((n) => n.text), ["globex over ws"])
    }))

  it.scopedLive("calling a procedure the client was not connected with is a clear defect", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const client = yield* Client.connect([listNotes], Client.layerHttp(served.rpcUrl))
      const exit = yield* Effect.exit(client.call(addNote, { text: "x", rank: 1 }))
      assert.isTrue(Exit.isFailure(exit) && Cause.pretty(exit.cause).includes(`procedure "notes.add" is not among the procedures`))
    }))

  it.scopedLive("a token per message on one socket", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const ws = yield* Serve.wsClient(served, app)
      const alice = yield* ws.call(whoAmI, {}, { headers: bearer("tok-alice") })
      const bob = yield* ws.call(whoAmI, {}, { headers: bearer("tok-bob") })
      const anonymous = yield* ws.call(whoAmI, {})
      assert.deepStrictEqual([alice.id, alice.tenantId], ["alice", "acme"])
      assert.deepStrictEqual([bob.id, bob.tenantId], ["bob", "globex"])
      assert.strictEqual(anonymous.id, "anonymous")
      const bad = yield* Effect.either(ws.call(whoAmI, {}, { headers: bearer("tok-bad") }))
      assert.isTrue(Either.isLeft(bad) && bad.left._tag === "Unauthenticated")
    }))

  it.scopedLive("a live query pushes a new result after each commit it can see, never another tenant's", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const ws = yield* Serve.wsClient(served, app)
      const http = yield* Serve.httpClient(served, app)
      const live = yield* subscribe(ws.live(listNotes, {}, { headers: bearer("tok-alice") }))
      assert.deepStrictEqual(live.first, [])
      yield* http.call(addNote, { text: "one", rank: 1 }, { headers: bearer("tok-alice") })
      assert.deepStrictEqual((yield* live.next).map((n) => n.text), ["one"])
      yield* http.call(addNote, { text: "not mine", rank: 0 }, { headers: bearer("tok-bob") })
      yield* http.call(addNote, { text: "two", rank: 2 }, { headers: bearer("tok-alice") })
      assert.deepStrictEqual((yield* live.next).map((n) => n.text), ["one", "two"])
    }))

  it.scopedLive("a row moved to another tenant leaves the first tenant's live result", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(memory)
      const store = Context.get(context, Store.Store)
      const served = yield* Serve.serve(app, Layer.succeedContext(context))
      const ws = yield* Serve.wsClient(served, app)
      const http = yield* Serve.httpClient(served, app)
      const note = yield* http.call(addNote, { text: "moving", rank: 1 }, { headers: bearer("tok-alice") })
      const live = yield* subscribe(ws.live(listNotes, {}, { headers: bearer("tok-alice") }))
      assert.deepStrictEqual(live.first.map((n) => n.text), ["moving"])
      // System code hands the row to another tenant: alice's subscription must drop it.
      yield* store.update(Notes, note.id, { tenantId: "globex" })
      assert.deepStrictEqual(yield* live.next, [])
    }))

  it.scopedLive("unsubscribing and disconnecting release the live subscription", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      // Polls the server's count until it reaches `n` (release happens asynchronously after a disconnect).
      const until = (n: number) =>
        liveSubscriptions(served).pipe(
          Effect.filterOrFail((count) => count === n),
          Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 250 }),
          Effect.orElse(() => liveSubscriptions(served))
        )
      const http = yield* Serve.httpClient(served, app)
      yield* Effect.scoped(Effect.gen(function*() {
        const ws = yield* Serve.wsClient(served, app)
        yield* subscribe(ws.live(listNotes, {}, { headers: bearer("tok-alice") }))
        yield* subscribe(ws.live(listNotes, {}, { headers: bearer("tok-bob") }))
        assert.strictEqual(yield* until(2), 2)
        // Unsubscribe one: a stream that ends after its first element.
        yield* ws.live(listNotes, {}, { headers: bearer("tok-alice") }).pipe(Stream.take(1), Stream.runDrain)
        yield* http.call(addNote, { text: "still served", rank: 1 }, { headers: bearer("tok-alice") })
        assert.strictEqual(yield* until(2), 2)
      }))
      // The socket closed with the scope: every subscription on it is released.
      assert.strictEqual(yield* until(0), 0)
    }))
})
