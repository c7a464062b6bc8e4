import { FetchHttpClient, Headers } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import * as Session from "../../src/auth/Session.js"
import * as Subject from "../../src/kernel/Subject.js"

const secret = "0123456789abcdef0123456789abcdef"
const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme", scopes: ["notes:write"], metadata: { plan: "pro" } })
const strategy = Session.passwordSessionStrategy({ secret })
const withCookie = (value: string, name = "fw:session") => ({ headers: Headers.fromInput({ cookie: `other=1; ${name}=${value}` }) })
const authenticate = (s: AuthStrategy.AuthStrategy, request: AuthStrategy.AuthRequest) =>
  s.authenticate(request).pipe(Effect.provide(FetchHttpClient.layer))
const refusal = (value: string, key = secret) =>
  Effect.map(Effect.flip(Session.verifySession(value, key)), (error) => error._tag === "SessionInvalid" ? error.reason : error._tag)

describe("Session", () => {
  it.effect("issue and verify round-trip the subject; the strategy authenticates with it", () =>
    Effect.gen(function*() {
      const value = yield* Session.issueSession(alice, secret)
      assert.deepStrictEqual(yield* Session.verifySession(value, secret), alice)
      const verdict = yield* authenticate(strategy, withCookie(value))
      assert.deepStrictEqual(verdict, AuthStrategy.Verdict.Authenticated({ subject: alice }))
      assert.strictEqual(strategy.id, "password-session")
    }))

  it.effect("a tampered payload is refused, and the strategy fails (the chain stops)", () =>
    Effect.gen(function*() {
      const value = yield* Session.issueSession(alice, secret)
      const [payload, signature] = value.split(".") as [string, string]
      const forged = Buffer.from(Buffer.from(payload, "base64url").toString().replace("acme", "evil")).toString("base64url")
      assert.notStrictEqual(forged, payload)
      assert.strictEqual(yield* refusal(`${forged}.${signature}`), "signature")
      assert.strictEqual((yield* authenticate(strategy, withCookie(`${forged}.${signature}`)))._tag, "Failed")
    }))

  it.effect("a changed signature is refused, including variants a lenient base64 decoder would accept", () =>
    Effect.gen(function*() {
      const value = yield* Session.issueSession(alice, secret)
      const last = value.at(-1) === "A" ? "B" : "A"
      assert.strictEqual(yield* refusal(`${value.slice(0, -1)}${last}`), "signature")
      assert.strictEqual(yield* refusal(`${value}=`), "signature")
      assert.strictEqual(yield* refusal(`${value}!`), "signature")
    }))

  it.effect("another secret does not verify the session", () =>
    Effect.gen(function*() {
      const value = yield* Session.issueSession(alice, secret)
      assert.strictEqual(yield* refusal(value, "another-secret-of-at-least-32-bytes!"), "signature")
      const other = Session.passwordSessionStrategy({ secret: "another-secret-of-at-least-32-bytes!" })
      assert.strictEqual((yield* authenticate(other, withCookie(value)))._tag, "Failed")
    }))

  it.effect("malformed values are refused", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* refusal("garbage"), "malformed")
      assert.strictEqual(yield* refusal("a.b.c"), "malformed")
    }))

  it.effect("sessions expire by the Effect Clock: default 7 days, or maxAgeSeconds", () =>
    Effect.gen(function*() {
      const short = yield* Session.issueSession(alice, secret, { maxAgeSeconds: 60 })
      const week = yield* Session.issueSession(alice, secret)
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual((yield* Session.verifySession(short, secret)).id, "alice")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* refusal(short), "expired")
      assert.strictEqual((yield* authenticate(strategy, withCookie(short)))._tag, "Failed")
      yield* TestClock.adjust(`${604_800 - 61} seconds`)
      assert.strictEqual((yield* Session.verifySession(week, secret)).id, "alice")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* refusal(week), "expired")
    }))

  it.effect("no cookie (or an empty one) is NoMatch; a custom cookie name is read instead", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* authenticate(strategy, { headers: Headers.empty }))._tag, "NoMatch")
      assert.strictEqual((yield* authenticate(strategy, withCookie("")))._tag, "NoMatch")
      const value = yield* Session.issueSession(alice, secret)
      const custom = Session.passwordSessionStrategy({ secret, cookieName: "app_session" })
      assert.strictEqual((yield* authenticate(custom, withCookie(value)))._tag, "NoMatch")
      assert.strictEqual((yield* authenticate(custom, withCookie(value, "app_session")))._tag, "Authenticated")
    }))

  it.effect("a secret under 32 bytes is a typed error", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Session.issueSession(alice, "short"))
      assert.deepStrictEqual([error._tag, error.bytes], ["SessionSecretTooShort", 5])
      assert.strictEqual((yield* Effect.flip(Session.verifySession("a.b", "x".repeat(31))))._tag, "SessionSecretTooShort")
      assert.throws(() => Session.passwordSessionStrategy({ secret: "short" }), Session.SessionSecretTooShort)
    }))

  it("cookie helpers produce the Set-Cookie strings", () => {
    assert.strictEqual(Session.sessionCookie("v.s", { maxAgeSeconds: 604_800 }), "fw:session=v.s; Path=/; Max-Age=604800; HttpOnly; SameSite=Lax")
    assert.strictEqual(Session.sessionCookie("v.s", { maxAgeSeconds: 60, secure: true }), "fw:session=v.s; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure")
    assert.strictEqual(Session.clearSessionCookie(), "fw:session=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax")
  })
})
