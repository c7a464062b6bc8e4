import { HttpServerResponse } from "@effect/platform"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import * as Idempotency from "../../src/http/Idempotency.js"
import * as IdempotencyStore from "../../src/http/IdempotencyStore.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"
import { jsonBody, send } from "./client.js"
import { bearer, counters, makeApp } from "./fixtures.js"
import { sqlTier, tiers } from "./tiers.js"

if (!Pg.serverUrl) console.warn(Pg.skipReason)

const app = makeApp({ idempotency: true })

const post = (url: string, path: string, key: string | undefined, body: unknown, token = "tok-alice") =>
  send(`${url}${path}`, jsonBody("POST", body, { ...bearer(token), ...(key === undefined ? {} : { "idempotency-key": key }) }))

for (const [name, tier] of tiers) {
  describe.skipIf(tier === null)(`idempotency over REST: ${name}`, () => {
    const serve = () => Serve.serve(app, tier!(), { applySchema: true })

    it.scopedLive("first run, then the verbatim replay with Idempotency-Replayed; another tenant's key is its own", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const before = counters.echo
        const first = yield* post(url, "/echo", "key-1", { n: 1 })
        assert.strictEqual(first.status, 200)
        assert.isNull(first.headers.get("idempotency-replayed"))
        const again = yield* post(url, "/echo", "key-1", { n: 1 })
        assert.strictEqual(again.status, 200)
        assert.strictEqual(again.headers.get("idempotency-replayed"), "true")
        assert.strictEqual(again.text, first.text)
        assert.strictEqual(again.headers.get("content-type"), "application/json")
        assert.strictEqual(counters.echo, before + 1)
        const otherTenant = yield* post(url, "/echo", "key-1", { n: 1 }, "tok-bob")
        assert.isNull(otherTenant.headers.get("idempotency-replayed"))
        assert.strictEqual((otherTenant.json() as { tenant: string }).tenant, "globex")
        const withoutKey = yield* post(url, "/echo", undefined, { n: 1 })
        assert.isNull(withoutKey.headers.get("idempotency-replayed"))
        assert.strictEqual(counters.echo, before + 3)
      }))

    it.scopedLive("200 concurrent requests with one key run the handler exactly once; the others get 409 or the replay", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const before = counters.echo
        const answers = yield* Effect.all(
          Array.from({ length: 200 }, () => post(url, "/echo", "burst", { n: 7 })),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(counters.echo, before + 1)
        const ran = answers.filter((a) => a.status === 200 && a.headers.get("idempotency-replayed") === null)
        const replayed = answers.filter((a) => a.status === 200 && a.headers.get("idempotency-replayed") === "true")
        const inFlight = answers.filter((a) => a.status === 409)
        assert.strictEqual(ran.length, 1)
        assert.strictEqual(ran.length + replayed.length + inFlight.length, 200)
        for (const replay of replayed) assert.strictEqual(replay.text, ran[0]!.text)
        assert.strictEqual(inFlight[0]?.headers.get("retry-after") ?? "1", "1")
      }))

    it.scopedLive("the same key with another body is 422; a malformed key is 400", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        assert.strictEqual((yield* post(url, "/echo", "key-2", { n: 1 })).status, 200)
        const other = yield* post(url, "/echo", "key-2", { n: 2 })
        assert.strictEqual(other.status, 422)
        assert.strictEqual((other.json() as { _tag: string })._tag, "IdempotencyKeyReused")
        assert.strictEqual((yield* post(url, "/echo", "x".repeat(300), { n: 1 })).status, 400)
        const quoted = yield* post(url, "/echo", `"key-2"`, { n: 1 })
        assert.strictEqual(quoted.headers.get("idempotency-replayed"), "true")
      }))

    it.scopedLive("failures before the handler (decode, guards, 413) and 5xx answers with nothing committed do not consume the key", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        assert.strictEqual((yield* post(url, "/v2/notes", "key-3", { text: "", rank: 1 })).status, 400)
        assert.strictEqual((yield* post(url, "/v2/notes", "key-4", { text: "x", rank: 1 }, "tok-carol")).status, 403)
        assert.strictEqual((yield* post(url, "/v2/notes", "key-5", { text: "x".repeat(5000), rank: 1 })).status, 413)
        for (const key of ["key-3", "key-4", "key-5"]) {
          const retried = yield* post(url, "/v2/notes", key, { text: "ok", rank: 1 })
          assert.strictEqual(retried.status, 200, key)
          assert.isNull(retried.headers.get("idempotency-replayed"))
        }
        const before = counters.echo
        assert.strictEqual((yield* post(url, "/echo/fail", "key-6", { status: 503 })).status, 503)
        assert.strictEqual((yield* post(url, "/echo/fail", "key-6", { status: 503 })).status, 503)
        assert.strictEqual(counters.echo, before + 2, "a 5xx with nothing committed frees the key: the retry runs")
        assert.strictEqual((yield* post(url, "/echo/fail", "key-7", { status: 418 })).status, 418)
        const replayed = yield* post(url, "/echo/fail", "key-7", { status: 418 })
        assert.strictEqual(replayed.status, 418)
        assert.strictEqual(replayed.headers.get("idempotency-replayed"), "true")
        assert.strictEqual(counters.echo, before + 3, "a handler's 4xx is kept and replayed")
      }))

    it.scopedLive("a mutation that committed and then answered 500 keeps its key: the retry gets the 500 replayed, not a second write", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const before = counters.failAfterWrite
        for (const [key, how] of [["key-w1", "status"], ["key-w2", "defect"]] as const) {
          const first = yield* post(url, "/notes/fail-after-write", key, { text: key, how })
          assert.strictEqual(first.status, 500, key)
          const retried = yield* post(url, "/notes/fail-after-write", key, { text: key, how })
          assert.strictEqual(retried.status, 500, key)
          assert.strictEqual(retried.headers.get("idempotency-replayed"), "true", key)
          assert.strictEqual(retried.text, first.text, key)
        }
        assert.strictEqual(counters.failAfterWrite, before + 2, "each handler ran once")
        const listed = yield* send(`${url}/v2/notes`, { headers: bearer("tok-alice") })
        const texts = (listed.json() as { notes: ReadonlyArray<{ text: string }> }).notes.map((n) => n.text).filter((t) => t.startsWith("key-w"))
        assert.deepStrictEqual(texts.sort(), ["key-w1", "key-w2"])
      }))

    it.scopedLive("a replay repeats every header the handler set, but not its Set-Cookie nor the trace id", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const before = counters.headed
        const first = yield* post(url, "/headed", "key-h", { n: 1 })
        assert.strictEqual(first.status, 200)
        assert.isNotNull(first.headers.get("set-cookie"))
        const replay = yield* post(url, "/headed", "key-h", { n: 1 })
        assert.strictEqual(replay.headers.get("idempotency-replayed"), "true")
        for (const name of ["x-order-state", "retry-after", "x-rate-note", "content-type"]) {
          assert.strictEqual(replay.headers.get(name), first.headers.get(name), name)
        }
        assert.strictEqual(replay.headers.get("x-order-state"), "accepted")
        assert.isNull(replay.headers.get("set-cookie"))
        assert.notStrictEqual(replay.headers.get("x-fw-trace-id"), first.headers.get("x-fw-trace-id") ?? "absent")
        assert.strictEqual(counters.headed, before + 1)
      }))

    it.scopedLive("a handler returning a stream without streaming: true fails, and its claim is released", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const before = counters.undeclared
        assert.strictEqual((yield* post(url, "/stream/undeclared", "key-8", {})).status, 500)
        assert.strictEqual((yield* post(url, "/stream/undeclared", "key-8", {})).status, 500)
        assert.strictEqual(counters.undeclared, before + 2)
      }))

    it.scopedLive("projected mutations are deduplicated too", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const first = yield* post(url, "/v1/notes/add", "key-9", { text: "once", rank: 1 })
        const second = yield* post(url, "/v1/notes/add", "key-9", { text: "once", rank: 1 })
        assert.strictEqual(first.status, 200)
        assert.strictEqual(second.headers.get("idempotency-replayed"), "true")
        const listed = yield* send(`${url}/v1/notes/list`, { headers: bearer("tok-alice") })
        assert.deepStrictEqual((listed.json() as ReadonlyArray<{ text: string }>).map((n) => n.text), ["once"])
        const refused = yield* post(url, "/v1/notes/add", "key-10", { text: "x", rank: 1 }, "tok-carol")
        assert.strictEqual(refused.status, 403)
        assert.strictEqual((yield* post(url, "/v1/notes/add", "key-10", { text: "after", rank: 2 })).status, 200)
      }))
  })
}

/** The record store's own states, with the TestClock moving past the TTL. */
const storeStates = (name: string, layer: () => Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>) =>
  it.effect(`record states on ${name}: in flight, completed, mismatch, re-run after the TTL`, () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const scope = { tenant: "acme", method: "POST", path: "/orders", key: "k" }
      const claimed = yield* store.claim(scope, "fp-1", 60_000)
      assert.strictEqual(claimed._tag, "Claimed")
      assert.strictEqual((yield* store.claim(scope, "fp-1", 60_000))._tag, "InFlight")
      assert.strictEqual((yield* store.claim(scope, "fp-2", 60_000))._tag, "Mismatch")
      const owner = claimed._tag === "Claimed" ? claimed.owner : ""
      yield* store.complete(scope, "someone-else", { status: 500, headers: {}, body: new Uint8Array() }, 60_000)
      assert.strictEqual((yield* store.claim(scope, "fp-1", 60_000))._tag, "InFlight", "only the holder completes")
      yield* store.complete(scope, owner, { status: 201, headers: { "content-type": "application/json" }, body: new TextEncoder().encode(`{"ok":1}`) }, 60_000)
      const completed = yield* store.claim(scope, "fp-1", 60_000)
      assert.strictEqual(completed._tag, "Completed")
      if (completed._tag === "Completed") {
        assert.strictEqual(completed.response.status, 201)
        assert.strictEqual(new TextDecoder().decode(completed.response.body), `{"ok":1}`)
      }
      assert.strictEqual((yield* store.claim({ ...scope, tenant: "globex" }, "fp-1", 60_000))._tag, "Claimed")
      yield* TestClock.adjust("61 seconds")
      assert.strictEqual((yield* store.claim(scope, "fp-9", 60_000))._tag, "Claimed", "a lapsed record is taken over")
      // A claim left in flight (a crash) also lapses after the TTL.
      const crashed = { ...scope, key: "crash" }
      assert.strictEqual((yield* store.claim(crashed, "fp", 1_000))._tag, "Claimed")
      assert.strictEqual((yield* store.claim(crashed, "fp", 1_000))._tag, "InFlight")
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* store.claim(crashed, "fp", 1_000))._tag, "Claimed")
    }).pipe(Effect.provide(layer()), Effect.orDie))

/** Leases: a renewed claim holds past its first lease, a dead one lapses; an answer lives its TTL from completion. */
const storeLeases = (name: string, layer: () => Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>) =>
  it.effect(`leases on ${name}: renewed while the owner lives, lapsed once it stops, answer kept its TTL`, () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const scope = { tenant: "acme", method: "POST", path: "/jobs", key: "lease" }
      const claimed = yield* store.claim(scope, "fp", 1_000)
      const owner = claimed._tag === "Claimed" ? claimed.owner : assert.fail("not claimed")
      for (let i = 0; i < 5; i++) {
        yield* TestClock.adjust("600 millis")
        assert.isTrue(yield* store.renew(scope, owner, 1_000))
        assert.strictEqual((yield* store.claim(scope, "fp", 1_000))._tag, "InFlight", `renewed ${i}`)
      }
      assert.isFalse(yield* store.renew(scope, "someone-else", 1_000), "only the holder renews")
      yield* TestClock.adjust("1001 millis")
      const taken = yield* store.claim(scope, "fp", 1_000)
      assert.strictEqual(taken._tag, "Claimed", "the lease lapsed: the next request takes the key")
      assert.isFalse(yield* store.renew(scope, owner, 1_000), "the old holder lost it")
      yield* store.complete(scope, owner, { status: 200, headers: {}, body: new Uint8Array() }, 60_000)
      assert.strictEqual((yield* store.claim(scope, "fp", 1_000))._tag, "InFlight", "the old holder cannot complete it")
      const next = taken._tag === "Claimed" ? taken.owner : ""
      yield* store.complete(scope, next, { status: 201, headers: {}, body: new Uint8Array() }, 60_000)
      assert.isFalse(yield* store.renew(scope, next, 1_000), "a completed record is not a lease")
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual((yield* store.claim(scope, "fp", 1_000))._tag, "Completed", "kept ttlMs from completion, not from the claim")
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* store.claim(scope, "fp", 1_000))._tag, "Claimed")
    }).pipe(Effect.provide(layer()), Effect.orDie))

describe("the idempotency record store", () => {
  storeStates("memory", () => IdempotencyStore.layerMemory)
  storeStates("sqlite", () => IdempotencyStore.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: ":memory:" }))))
  if (Pg.serverUrl) storeStates("postgresql", () => IdempotencyStore.layerSql.pipe(Layer.provide(Pg.layerFreshClient)))
  storeLeases("memory", () => IdempotencyStore.layerMemory)
  storeLeases("sqlite", () => IdempotencyStore.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: ":memory:" }))))
  if (Pg.serverUrl) storeLeases("postgresql", () => IdempotencyStore.layerSql.pipe(Layer.provide(Pg.layerFreshClient)))

  it.effect("the memory store is bounded: the oldest answers go first, requests in flight are never evicted", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemoryBounded({ maxRecords: 3, maxBytes: 100 })
      const scope = (key: string) => ({ tenant: "acme", method: "POST", path: "/x", key })
      const answer = (size: number) => ({ status: 200, headers: {}, body: new Uint8Array(size) })
      const completed = (key: string, size: number) =>
        Effect.flatMap(store.claim(scope(key), "fp", 1_000), (claim) =>
          claim._tag === "Claimed" ? store.complete(scope(key), claim.owner, answer(size), 60_000) : Effect.die(`not claimed: ${key}`))
      yield* completed("a", 10)
      yield* completed("b", 10)
      yield* completed("c", 10)
      yield* completed("d", 10)
      assert.strictEqual((yield* store.claim(scope("a"), "fp", 1_000))._tag, "Claimed", "the oldest answer was evicted for d")
      // a is now in flight; b went to make room for it.
      for (const key of ["c", "d"]) assert.strictEqual((yield* store.claim(scope(key), "fp", 1_000))._tag, "Completed", key)
      assert.strictEqual((yield* store.claim(scope("a"), "fp", 1_000))._tag, "InFlight", "a is in flight")

      const byBytes = yield* IdempotencyStore.makeMemoryBounded({ maxRecords: 100, maxBytes: 100 })
      const completedIn = (key: string, size: number) =>
        Effect.flatMap(byBytes.claim(scope(key), "fp", 1_000), (claim) =>
          claim._tag === "Claimed" ? byBytes.complete(scope(key), claim.owner, answer(size), 60_000) : Effect.die(`not claimed: ${key}`))
      yield* completedIn("x", 60)
      yield* completedIn("y", 30)
      yield* completedIn("z", 30)
      assert.strictEqual((yield* byBytes.claim(scope("x"), "fp", 1_000))._tag, "Claimed", "x evicted to keep 100 bytes")
      for (const key of ["y", "z"]) assert.strictEqual((yield* byBytes.claim(scope(key), "fp", 1_000))._tag, "Completed", key)
      yield* completedIn("big", 200)
      assert.strictEqual((yield* byBytes.claim(scope("big"), "fp", 1_000))._tag, "Claimed", "an answer over the bound is not kept")

      const inFlight = yield* IdempotencyStore.makeMemoryBounded({ maxRecords: 2 })
      yield* inFlight.claim(scope("p"), "fp", 1_000)
      yield* inFlight.claim(scope("q"), "fp", 1_000)
      const refused = yield* Effect.flip(inFlight.claim(scope("r"), "fp", 1_000))
      assert.strictEqual(refused._tag, "IdempotencyUnavailable")
      assert.strictEqual((yield* inFlight.claim(scope("p"), "fp", 1_000))._tag, "InFlight", "never evicted while in flight")
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* inFlight.claim(scope("r"), "fp", 1_000))._tag, "Claimed", "lapsed leases make room")
    }))

  it.effect("a replay never repeats Set-Cookie (nor Date or Connection)", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const settings = Idempotency.settingsOf(true)!
      const scope = { tenant: "acme", method: "POST", path: "/login", key: "k" }
      const run = Effect.succeed<Idempotency.Outcome>({
        response: HttpServerResponse.text("welcome", {
          headers: { "set-cookie": "fw:session=secret", location: "/home", date: "Mon, 01 Jan 2024 00:00:00 GMT", connection: "close" }
        }),
        handlerRan: true
      })
      const first = yield* Idempotency.guarded(store, scope, "fp", settings, run)
      assert.strictEqual(first.headers["set-cookie"], "fw:session=secret")
      const replay = yield* Idempotency.guarded(store, scope, "fp", settings, run)
      assert.strictEqual(replay.headers["idempotency-replayed"], "true")
      assert.strictEqual(replay.headers["location"], "/home")
      assert.isUndefined(replay.headers["set-cookie"])
      assert.isUndefined(replay.headers["date"])
      assert.isUndefined(replay.headers["connection"])
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))
})

describe("the store in use", () => {
  it.scopedLive("an IdempotencyStore in context is used instead of the one matching the store", () =>
    Effect.gen(function*() {
      const claims: Array<string> = []
      const recording = Layer.effect(
        IdempotencyStore.IdempotencyStore,
        Effect.map(IdempotencyStore.makeMemory, (inner) => ({
          ...inner,
          claim: (scope: IdempotencyStore.Scope, fingerprint: string, ttlMs: number) =>
            Effect.zipRight(Effect.sync(() => claims.push(scope.key)), inner.claim(scope, fingerprint, ttlMs))
        }))
      )
      const tier = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.merge(recording))
      const { url } = yield* Serve.serve(app, tier)
      yield* post(url, "/echo", "mine", { n: 1 })
      assert.deepStrictEqual(claims, ["mine"])
    }))
})

describe.skipIf(!Pg.serverUrl)("two app instances sharing PostgreSQL", () => {
  it.scopedLive("agree on one key: 200 concurrent requests across both run the handler once", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const instance = () => sqlTier(Pg.layerClient(url))
      const a = yield* Serve.serve(app, instance(), { applySchema: true })
      const b = yield* Serve.serve(app, instance(), { applySchema: true })
      const before = counters.echo
      const answers = yield* Effect.all(
        Array.from({ length: 200 }, (_, i) => post(i % 2 === 0 ? a.url : b.url, "/echo", "shared", { n: 3 })),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(counters.echo, before + 1)
      assert.isTrue(answers.every((r) => r.status === 200 || r.status === 409))
      const replays = answers.filter((r) => r.headers.get("idempotency-replayed") === "true")
      const late = yield* post(b.url, "/echo", "shared", { n: 3 })
      assert.strictEqual(late.headers.get("idempotency-replayed"), "true")
      assert.isAtLeast(replays.length + answers.filter((r) => r.status === 409).length, 199)
    }))
})
