import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Schedule, Scope } from "effect"
import { WebSocket } from "ws"
import { GuardRefused } from "../../src/app/Guard.js"
import { Unauthenticated } from "../../src/app/Errors.js"
import type { ClientError, LiveQuery, LiveState, SocketConstructor } from "../../src/client/index.js"
import { Disconnected, InputInvalid, mount } from "../../src/client/index.js"
import { ChangeTap } from "../../src/kernel/changes/ChangeTap.js"
import { Store } from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { addTodo, hang, listTodos, whoami } from "./contracts.js"
import { app, memory } from "./fixtures.js"

process.env.FW_INSPECT_TOKEN = "client-inspect-token"

/** The number of live subscriptions open on the server (the inspect surface's count). */
const openOnServer = (served: Serve.Served) =>
  Effect.promise(() =>
    fetch(`${served.url}/_fw/inspect/live`, { headers: { authorization: "Bearer client-inspect-token" } })
      .then((response) => response.json() as Promise<{ subscriptions: number }>)
  ).pipe(Effect.map((body) => body.subscriptions))

/** Waits until the server's count is `expected` (it drops when the server has processed the interrupt). */
const expectOpen = (served: Serve.Served, expected: number) =>
  openOnServer(served).pipe(
    Effect.filterOrFail((count) => count === expected, (count) => `expected ${expected} open subscriptions, got ${count}`),
    Effect.retry({ schedule: Schedule.spaced("10 millis"), times: 300 }),
    Effect.orDie
  )

const Socket = WebSocket as unknown as SocketConstructor
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** Resolves with the first snapshot of `live` that satisfies `done` (subscribed meanwhile). */
const until = <O>(live: LiveQuery<O>, done: (state: LiveState<O>) => boolean) =>
  Effect.async<LiveState<O>>((resume) => {
    const check = () => {
      const state = live.getSnapshot()
      if (done(state)) {
        unsubscribe()
        resume(Effect.succeed(state))
      }
    }
    const unsubscribe = live.subscribe(check)
    check()
    return Effect.sync(unsubscribe)
  })

const failure = <A>(promise: () => Promise<A>) =>
  Effect.flip(Effect.tryPromise({ try: promise, catch: (error) => error as ClientError }))

const mounted = (apis: Parameters<typeof mount>[0]["apis"]) =>
  Effect.acquireRelease(
    Effect.sync(() => mount({ apis, WebSocket: Socket, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } })),
    (fw) => Effect.sync(fw.dispose)
  )

describe("mount(): the browser client over the WebSocket", () => {
  it.scopedLive("calls procedures by value with typed outputs and headers resolved per connect", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      let resolved = 0
      const fw = yield* mounted({
        main: { url: served.rpcUrl, headers: { "x-app": "tests" }, authHeaders: async () => (resolved++, bearer("tok-alice")) }
      })
      const api = fw.apis.main
      const added = yield* Effect.promise(() => api.call(addTodo, { text: "milk" }))
      assert.strictEqual(added.text, "milk")
      const me = yield* Effect.promise(() => api.call(whoami, {}))
      assert.deepStrictEqual(me, { type: "user", id: "alice", tenantId: "acme" })
      const list = yield* Effect.promise(() => api.call(listTodos, {}))
      assert.deepStrictEqual(list.map((todo) => todo.text), ["milk"])
      assert.strictEqual(resolved, 1, "one connection, one resolution of authHeaders")
      assert.strictEqual(api.connectionState.getSnapshot().status, "open")
    }))

  it.scopedLive("every failure is a typed error: input, unauthenticated, guard refusal, no server", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const fw = yield* mounted({
        carol: { url: served.rpcUrl, authHeaders: async () => bearer("tok-carol") },
        stranger: { url: served.rpcUrl, authHeaders: async () => bearer("tok-nobody") },
        anonymous: { url: served.rpcUrl },
        failing: { url: served.rpcUrl, authHeaders: () => Promise.reject(new Error("token endpoint down")) },
        nowhere: { url: "ws://127.0.0.1:1/rpc" }
      })
      const invalid = yield* failure(() => fw.apis.carol.call(addTodo, { text: "" }))
      assert.instanceOf(invalid, InputInvalid)
      const refused = yield* failure(() => fw.apis.carol.call(addTodo, { text: "x" }))
      assert.instanceOf(refused, GuardRefused)
      assert.strictEqual(refused._tag === "GuardRefused" && refused.status, 403)
      const unauthenticated = yield* failure(() => fw.apis.stranger.call(whoami, {}))
      assert.instanceOf(unauthenticated, Unauthenticated)
      const anonymous = yield* Effect.promise(() => fw.apis.anonymous.call(whoami, {}))
      assert.strictEqual(anonymous.type, "anonymous")
      const anonymousList = yield* failure(() => fw.apis.anonymous.call(listTodos, {}))
      assert.strictEqual(anonymousList._tag === "GuardRefused" && anonymousList.status, 401)
      const headers = yield* failure(() => fw.apis.failing.call(whoami, {}))
      assert.strictEqual(headers._tag, "HeadersFailed")
      assert.include(headers.message, "token endpoint down")
      const unreachable = yield* failure(() => fw.apis.nowhere.call(whoami, {}))
      assert.instanceOf(unreachable, Disconnected)
      assert.isFalse(unreachable._tag === "Disconnected" && unreachable.sent)
    }))

  it.scopedLive("a live query updates after another client's mutation; a refusal is its state", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const fw = yield* mounted({
        alice: { url: served.rpcUrl, authHeaders: async () => bearer("tok-alice") },
        bob: { url: served.rpcUrl, authHeaders: async () => bearer("tok-bob") },
        anonymous: { url: served.rpcUrl }
      })
      const other = yield* mounted({ alice: { url: served.rpcUrl, authHeaders: async () => bearer("tok-alice") } })
      const live = fw.apis.alice.live(listTodos, {})
      assert.strictEqual(fw.apis.alice.live(listTodos, {}).key, live.key, "same procedure and input share one subscription")
      const first = yield* until(live, (state) => state.status === "live")
      assert.deepStrictEqual(first.data, [])
      const keep = live.subscribe(() => undefined)
      yield* Effect.promise(() => other.apis.alice.call(addTodo, { text: "bread" }))
      yield* Effect.promise(() => fw.apis.bob.call(addTodo, { text: "not yours" }))
      const second = yield* until(live, (state) => (state.data?.length ?? 0) > 0)
      assert.deepStrictEqual(second.data?.map((todo) => todo.text), ["bread"])
      yield* expectOpen(served, 1)
      keep()
      yield* expectOpen(served, 0)
      const refused = yield* until(fw.apis.anonymous.live(listTodos, {}), (state) => state.status === "error")
      assert.instanceOf(refused.error, GuardRefused)
    }))

  it.scopedLive("after a server restart it reconnects, resolves authHeaders again and resubscribes", () =>
    Effect.gen(function*() {
      const storeContext = yield* Layer.build(memory)
      const store = Layer.succeedContext(Context.pick(Store, ChangeTap)(storeContext))
      const first = yield* Scope.make()
      const served = yield* Serve.serve(app, store).pipe(Scope.extend(first))
      const port = Number(new URL(served.url).port)
      const issued: Array<string> = []
      const fw = yield* mounted({
        main: {
          url: served.rpcUrl,
          authHeaders: async () => {
            const token = issued.length === 0 ? "tok-alice" : "tok-alice-2"
            issued.push(token)
            return bearer(token)
          }
        }
      })
      const api = fw.apis.main
      const live = api.live(listTodos, {})
      const keep = live.subscribe(() => undefined)
      yield* until(live, (state) => state.status === "live")
      const inflight = failure(() => api.call(hang, {})).pipe(Effect.fork)
      const pending = yield* inflight
      yield* Scope.close(first, Exit.void)
      const lost = yield* pending.await.pipe(Effect.flatten)
      assert.instanceOf(lost, Disconnected)
      assert.isTrue(lost._tag === "Disconnected" && lost.sent, "a call in flight may have run")
      const dropped = yield* until(live, (state) => state.status === "reconnecting")
      assert.deepStrictEqual(dropped.data, [], "the last data is kept while reconnecting")
      const second = yield* Serve.serve(app, store, {}, port)
      assert.strictEqual(second.url, served.url)
      yield* until(live, (state) => state.status === "live")
      yield* Effect.promise(() => api.call(addTodo, { text: "after restart" }))
      const updated = yield* until(live, (state) => (state.data?.length ?? 0) === 1)
      assert.deepStrictEqual(updated.data?.map((todo) => todo.text), ["after restart"])
      assert.deepStrictEqual(issued.slice(0, 1), ["tok-alice"])
      assert.isAtLeast(issued.length, 2, "authHeaders is resolved again on reconnect")
      keep()
    }))
})
