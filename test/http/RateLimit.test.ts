/**
 * Rate limits on REST routes and projected procedures, served over real sockets on every store
 * tier, with the windows driven by the `TestClock` (the server is built in the test's fiber, so
 * its clock is the test clock).
 */
import type { SqlClient } from "@effect/sql"
import { SqlClient as SqlClientTag } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema, TestClock } from "effect"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import * as RateLimit from "../../src/app/RateLimit.js"
import { RateLimitCounters } from "../../src/app/tables.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as RateLimitStore from "../../src/http/RateLimitStore.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"
import { jsonBody, send } from "./client.js"
import type { Reply } from "./client.js"
import { tiers } from "./tiers.js"
import * as TokenStrategy from "../support/TokenStrategy.js"

if (!Pg.serverUrl) console.warn(Pg.skipReason)

const callers: Record<string, Subject.Subject> = {
  "tok-alice": Subject.make({ type: "user", id: "alice", tenantId: "acme" }),
  "tok-carol": Subject.make({ type: "user", id: "carol", tenantId: "acme" }),
  "tok-bob": Subject.make({ type: "user", id: "bob", tenantId: "globex" })
}

const tokens = TokenStrategy.make("rate-limit-test", callers)

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** Handler runs, to prove a refused request never reaches its handler. */
const runs = { limited: 0 }

const limited = defineRestRoute({
  method: "GET",
  path: "/limited",
  rateLimit: { limit: 3, windowMs: 60_000 },
  handler: () => Effect.sync(() => ({ n: ++runs.limited }))
})

const byIp = defineRestRoute({
  method: "POST",
  path: "/by-ip",
  rateLimit: { limit: 2, windowMs: 10_000, by: "ip" },
  handler: () => Effect.succeed({ ok: true })
})

/** Requests carrying `x-exempt` are not counted; others are counted per `x-client` header. */
const byFunction = defineRestRoute({
  method: "GET",
  path: "/by-function",
  rateLimit: {
    limit: 1,
    windowMs: 5_000,
    by: ({ headers }) => headers["x-exempt"] !== undefined ? undefined : headers["x-client"] ?? "none"
  },
  handler: () => Effect.succeed({ ok: true })
})

const unlimited = defineRestRoute({ method: "GET", path: "/unlimited", handler: () => Effect.succeed({ ok: true }) })

const addNote = mutation("notes.add", {
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ text: Schema.String }),
  publicApi: { rateLimit: { limit: 2, windowMs: 30_000, by: "tenant" } },
  handler: (input) => Effect.succeed(input)
})

const listNotes = query("notes.list", {
  input: Schema.Struct({}),
  output: Schema.Array(Schema.String),
  publicApi: { rateLimit: { limit: 1, windowMs: 1_000 } },
  handler: () => Effect.succeed([])
})

const feed = query("notes.feed", {
  input: Schema.Struct({}),
  output: Schema.Array(Schema.String),
  publicApi: { stream: "sse", rateLimit: { limit: 1, windowMs: 60_000 } },
  handler: () => Effect.succeed([])
})

const app = defineApp({
  name: "rate-limits",
  procedures: [addNote, listNotes, feed],
  restRoutes: [limited, byIp, byFunction, unlimited],
  auth: [tokens]
})

const get = (url: string, token?: string, headers: Record<string, string> = {}) =>
  send(url, { headers: { ...(token === undefined ? {} : bearer(token)), ...headers } })

const statuses = (replies: ReadonlyArray<Reply>) => replies.map((reply) => reply.status)

describe("rateLimit declarations", () => {
  it("are checked at definition: a malformed one throws RateLimitInvalid naming what declared it", () => {
    const bad: ReadonlyArray<readonly [unknown, RegExp]> = [
      [{ limit: 0, windowMs: 1000 }, /limit must be a positive integer, got 0/],
      [{ limit: 1.5, windowMs: 1000 }, /limit must be a positive integer/],
      [{ limit: 10 }, /windowMs must be a whole number of milliseconds of at least 1000, got undefined/],
      [{ limit: 10, windowMs: 500 }, /windowMs .* at least 1000, got 500/],
      [{ limit: 10, windowMs: "1m" }, /windowMs/],
      [{ limit: 10, windowMs: 1000, by: "user" }, /by must be "subject", "tenant", "ip" or a function/],
      [{ limit: 10, windowMs: 1000, max: 5 }, /unknown key "max"/],
      [10, /must be an object/],
      [null, /must be an object/]
    ]
    for (const [rateLimit, message] of bad) {
      const fromProcedure = () =>
        mutation("things.add", {
          input: Schema.Struct({}),
          output: Schema.Struct({}),
          publicApi: { rateLimit: rateLimit as RateLimit.RateLimit },
          handler: () => Effect.succeed({})
        })
      const fromRoute = () =>
        defineRestRoute({ method: "POST", path: "/things", rateLimit: rateLimit as RateLimit.RateLimit, handler: () => Effect.succeed({}) })
      for (const [define, what] of [[fromProcedure, `procedure "things.add" (publicApi)`], [fromRoute, "route POST /things"]] as const) {
        try {
          define()
          assert.fail(`accepted ${JSON.stringify(rateLimit)}`)
        } catch (error) {
          assert.instanceOf(error, RateLimit.RateLimitInvalid)
          assert.strictEqual((error as RateLimit.RateLimitInvalid)._tag, "RateLimitInvalid")
          assert.match((error as Error).message, message)
          assert.isTrue((error as Error).message.startsWith(`${what}: rateLimit `), (error as Error).message)
        }
      }
    }
  })

  it("default to counting by subject, and make the app declare the counters' table", () => {
    assert.deepStrictEqual(limited.rateLimit, { limit: 3, windowMs: 60_000, by: "subject" })
    assert.strictEqual(addNote.publicApi?.rateLimit?.by, "tenant")
    assert.isTrue(app.tables.includes(RateLimitCounters))
    assert.isFalse(defineApp({ restRoutes: [unlimited] }).tables.includes(RateLimitCounters))
  })
})

for (const [name, tier] of tiers) {
  describe.skipIf(tier === null)(`rate limits over REST: ${name}`, () => {
    const serve = () => Serve.serve(app, tier!(), { applySchema: true })

    it.scoped("a burst gets exactly `limit` answers, then 429 with Retry-After and the RateLimit headers; the window resets on the clock", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const before = runs.limited
        const replies: Array<Reply> = []
        for (let i = 0; i < 5; i++) replies.push(yield* get(`${url}/limited`, "tok-alice"))
        assert.deepStrictEqual(statuses(replies), [200, 200, 200, 429, 429])
        assert.strictEqual(runs.limited, before + 3, "a refused request never reaches the handler")
        for (const [i, reply] of replies.entries()) {
          assert.strictEqual(reply.headers.get("ratelimit-policy"), `"3-in-60s";q=3;w=60`)
          assert.strictEqual(reply.headers.get("ratelimit"), `"3-in-60s";r=${Math.max(0, 2 - i)};t=60`)
        }
        const refused = replies[3]!
        assert.strictEqual(refused.headers.get("retry-after"), "60")
        assert.deepStrictEqual(refused.json(), { _tag: "RateLimited", message: "too many requests: at most 3 per 60 s; retry in 60 s" })
        // Each caller has its own counter; unlimited routes carry no headers.
        assert.strictEqual((yield* get(`${url}/limited`, "tok-bob")).status, 200)
        const free = yield* get(`${url}/unlimited`, "tok-alice")
        assert.strictEqual(free.status, 200)
        assert.isNull(free.headers.get("ratelimit"))
        // Time left shrinks with the clock; once the window ends the caller starts a new one.
        yield* TestClock.adjust("45 seconds")
        const later = yield* get(`${url}/limited`, "tok-alice")
        assert.strictEqual(later.status, 429)
        assert.strictEqual(later.headers.get("retry-after"), "15")
        yield* TestClock.adjust("15 seconds")
        const fresh = yield* get(`${url}/limited`, "tok-alice")
        assert.strictEqual(fresh.status, 200)
        assert.strictEqual(fresh.headers.get("ratelimit"), `"3-in-60s";r=2;t=60`)
      }))

    it.scoped("concurrent requests: exactly `limit` are admitted", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const replies = yield* Effect.all(Array.from({ length: 24 }, () => get(`${url}/limited`, "tok-carol")), {
          concurrency: "unbounded"
        })
        assert.strictEqual(replies.filter((reply) => reply.status === 200).length, 3)
        assert.strictEqual(replies.filter((reply) => reply.status === 429).length, 21)
      }))

    it.scoped("projected procedures: by tenant, callers of one tenant share the count; a query limited by subject", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const add = (token: string) => send(`${url}/v1/notes/add`, jsonBody("POST", { text: "hi" }, bearer(token)))
        assert.deepStrictEqual(statuses([yield* add("tok-alice"), yield* add("tok-carol")]), [200, 200])
        const third = yield* add("tok-alice")
        assert.strictEqual(third.status, 429)
        assert.strictEqual(third.headers.get("ratelimit-policy"), `"2-in-30s";q=2;w=30`)
        assert.strictEqual(third.headers.get("retry-after"), "30")
        assert.strictEqual((yield* add("tok-bob")).status, 200, "another tenant has its own count")
        assert.strictEqual((yield* get(`${url}/v1/notes/list`, "tok-alice")).status, 200)
        assert.strictEqual((yield* get(`${url}/v1/notes/list`, "tok-alice")).status, 429)
        assert.strictEqual((yield* get(`${url}/v1/notes/list`, "tok-carol")).status, 200)
        yield* TestClock.adjust("1 seconds")
        assert.strictEqual((yield* get(`${url}/v1/notes/list`, "tok-alice")).status, 200)
        // Counting starts once the caller is known: a failed credential is answered 401, uncounted.
        const unknown = yield* send(`${url}/v1/notes/add`, jsonBody("POST", { text: "hi" }, bearer("tok-nobody")))
        assert.strictEqual(unknown.status, 401)
        assert.isNull(unknown.headers.get("ratelimit"))
      }))

    it.scoped("by ip, and anonymous callers of a subject limit, count per address; a `by` function may leave requests uncounted", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const post = (token?: string) => send(`${url}/by-ip`, jsonBody("POST", {}, token === undefined ? {} : bearer(token)))
        assert.deepStrictEqual(statuses([yield* post("tok-alice"), yield* post("tok-bob"), yield* post()]), [200, 200, 429])
        assert.deepStrictEqual(
          statuses([yield* get(`${url}/limited`), yield* get(`${url}/limited`), yield* get(`${url}/limited`), yield* get(`${url}/limited`)]),
          [200, 200, 200, 429],
          "anonymous callers are keyed by address"
        )
        const client = (id: string, extra: Record<string, string> = {}) => get(`${url}/by-function`, undefined, { "x-client": id, ...extra })
        assert.deepStrictEqual(statuses([yield* client("a"), yield* client("a"), yield* client("b")]), [200, 429, 200])
        const exempt = yield* client("a", { "x-exempt": "1" })
        assert.strictEqual(exempt.status, 200)
        assert.isNull(exempt.headers.get("ratelimit"), "an uncounted request carries no count")
      }))

    it.scoped("opening a live query's stream is one request", () =>
      Effect.gen(function*() {
        const { url } = yield* serve()
        const open = Effect.acquireRelease(
          Effect.sync(() => new AbortController()),
          (controller) => Effect.sync(() => controller.abort())
        ).pipe(Effect.flatMap((controller) =>
          Effect.promise(() => fetch(`${url}/v1/notes/feed`, { headers: bearer("tok-alice"), signal: controller.signal }))
        ))
        const first = yield* open
        assert.strictEqual(first.status, 200)
        assert.strictEqual(first.headers.get("content-type"), "text/event-stream")
        assert.strictEqual(first.headers.get("ratelimit"), `"1-in-60s";r=0;t=60`)
        const second = yield* open
        assert.strictEqual(second.status, 429)
        assert.strictEqual(second.headers.get("retry-after"), "60")
      }))

    if (name !== "memory") {
      it.scoped("counters that cannot be reached answer 503 RateLimitUnavailable, and the handler does not run", () =>
        Effect.gen(function*() {
          const built = yield* Layer.build(tier!())
          const { url } = yield* Serve.serve(app, Layer.succeedContext(built), { applySchema: true })
          const sql = Context.unsafeGet(built as Context.Context<unknown> as Context.Context<SqlClient.SqlClient>, SqlClientTag.SqlClient)
          yield* sql`DROP TABLE ${sql(RateLimitCounters.name)}`
          const before = runs.limited
          const reply = yield* get(`${url}/limited`, "tok-alice")
          assert.strictEqual(reply.status, 503)
          assert.strictEqual((reply.json() as { _tag: string })._tag, "RateLimitUnavailable")
          assert.notInclude(reply.text, RateLimitCounters.name, "no internals in the body")
          assert.strictEqual(runs.limited, before)
        }))
    }
  })
}

describe("rate limits and idempotency keys", () => {
  const idempotent = defineApp({ name: "rate-limits-idempotent", restRoutes: [byIp], auth: [tokens], idempotency: true })
  const memory = () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
  const post = (url: string, key: string) => send(`${url}/by-ip`, jsonBody("POST", {}, { ...bearer("tok-alice"), "idempotency-key": key }))

  it.scoped("a replay is counted and shows the current count; a 429 does not use up the key", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(idempotent, memory())
      const first = yield* post(url, "k1")
      assert.strictEqual(first.headers.get("ratelimit"), `"2-in-10s";r=1;t=10`)
      const replay = yield* post(url, "k1")
      assert.strictEqual(replay.headers.get("idempotency-replayed"), "true")
      assert.strictEqual(replay.headers.get("ratelimit"), `"2-in-10s";r=0;t=10`)
      const refused = yield* post(url, "k2")
      assert.strictEqual(refused.status, 429)
      yield* TestClock.adjust("10 seconds")
      const retried = yield* post(url, "k2")
      assert.strictEqual(retried.status, 200)
      assert.isNull(retried.headers.get("idempotency-replayed"), "the 429 was not recorded under k2")
    }))
})

/** The counters' own windows, with the TestClock. */
const counterWindows = (name: string, layer: () => Layer.Layer<RateLimitStore.RateLimitStore, unknown>) =>
  it.effect(`counter windows on ${name}: counted, kept until the window ends, restarted after`, () =>
    Effect.gen(function*() {
      const store = yield* RateLimitStore.RateLimitStore
      assert.deepStrictEqual(yield* store.hit("k", 10_000, 1_000), { count: 1, resetAt: 11_000 })
      assert.deepStrictEqual(yield* store.hit("k", 10_000, 5_000), { count: 2, resetAt: 11_000 })
      assert.deepStrictEqual(yield* store.hit("other", 10_000, 5_000), { count: 1, resetAt: 15_000 })
      assert.deepStrictEqual(yield* store.hit("k", 10_000, 10_999), { count: 3, resetAt: 11_000 })
      assert.deepStrictEqual(yield* store.hit("k", 10_000, 11_000), { count: 1, resetAt: 21_000 })
      const long = "x".repeat(5_000) + "\u0000"
      assert.deepStrictEqual(yield* store.hit(long, 10_000, 1_000), { count: 1, resetAt: 11_000 })
      assert.deepStrictEqual(yield* store.hit(long, 10_000, 2_000), { count: 2, resetAt: 11_000 })
      assert.deepStrictEqual(yield* store.hit("a\u0000b", 10_000, 2_000), { count: 1, resetAt: 12_000 })
      // The sweep (SQL: every 10 minutes) forgets ended windows; counting goes on.
      yield* TestClock.adjust("11 minutes")
      assert.deepStrictEqual(yield* store.hit("k", 10_000, 700_000), { count: 1, resetAt: 710_000 })
    }).pipe(Effect.provide(layer()), Effect.orDie))

describe("the rate-limit counters", () => {
  counterWindows("memory", () => RateLimitStore.layerMemory)
  counterWindows("sqlite", () => RateLimitStore.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: ":memory:" }))))
  if (Pg.serverUrl) {
    counterWindows("postgresql", () => RateLimitStore.layerSql.pipe(Layer.provide(Pg.layerFreshClient)))

    it.effect("on PostgreSQL the counters' table is made UNLOGGED (no WAL flush per request), also when it was created logged", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClientTag.SqlClient
        const persistence = sql<{ readonly relpersistence: string }>`SELECT relpersistence FROM pg_class WHERE relname = '_fw_rate_limits'`
        yield* SchemaDiffer.apply([RateLimitCounters])
        assert.strictEqual((yield* persistence)[0]?.relpersistence, "p", "the schema differ creates it logged")
        yield* Layer.build(RateLimitStore.layerSql)
        assert.strictEqual((yield* persistence)[0]?.relpersistence, "u")
        yield* Layer.build(RateLimitStore.layerSql)
        assert.strictEqual((yield* persistence)[0]?.relpersistence, "u", "a second boot leaves it so")
      }).pipe(Effect.scoped, Effect.provide(Pg.layerFreshClient), Effect.orDie))
  }
})
