import { FetchHttpClient, Headers } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as AuthStrategy from "../../src/auth/AuthStrategy.js"
import * as Session from "../../src/auth/Session.js"
import * as Subject from "../../src/kernel/Subject.js"

const secret = "0123456789abcdef0123456789abcdef"
const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme", scopes: ["notes:write"], metadata: { plan: "pro" } })
const strategy = Session.passwordSessionStrategy({ secret })
const withCookie = (value: string) => ({ headers: Headers.fromInput({ cookie: `other=1; fw:session=${value}` }) })
const noHeaders = { headers: Headers.empty }
const authenticate = (s: AuthStrategy.AuthStrategy, request: AuthStrategy.AuthRequest) =>
  s.authenticate(request).pipe(Effect.provide(FetchHttpClient.layer))

describe("Session", () => {
  it.effect("issue and verify round-trip the subject", () =>
    Effect.gen(function*() {
      const value = yield* Session.issueSession(alice, secret)
      assert.deepStrictEqual(yield* Session.verifySession(value, secret), alice)
      const verdict = yield* authenticate(strategy, withCookie(value))
      assert.isTrue(verdict._tag === "Authenticated" && verdict.subject.id === "alice")
    }))

  it.effect("a tampered payload or signature, or another secret, is refused", () =>
    Effect.gen(function*() {
      const value = yield* Session.issueSession(alice, secret)
      const [payload, signature] = value.split(".") as [string, string]
      const forged = Buffer.from(Buffer.from(payload, "base64url").toString().replace("acme", "evil")).toString("base64url")
      assert.strictEqual((yield* Effect.flip(Session.verifySession(`${forged}.${signature}`, secret)))._tag, "SessionInvalid")
      assert.strictEqual((yield* Effect.flip(Session.verifySession(`${payload}.${signature}x`, secret)))._tag, "SessionInvalid")
      assert.strictEqual((yield* Effect.flip(Session.verifySession(value, secret.toUpperCase())))._tag, "SessionInvalid")
      assert.strictEqual((yield* Effect.flip(Session.verifySession("garbage", secret)))._tag, "SessionInvalid")
      const verdict = yield* authenticate(strategy, withCookie(`${forged}.${signature}`))
      assert.strictEqual(verdict._tag, "Failed")
    }))

  it.effect("sessions expire (TestClock)", () =>
    Effect.gen(function*() {
      const value = yield* Session.issueSession(alice, secret, { maxAgeSeconds: 60 })
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual((yield* Session.verifySession(value, secret)).id, "alice")
      yield* TestClock.adjust("1 second")
      const error = yield* Effect.flip(Session.verifySession(value, secret))
      assert.isTrue(error._tag === "SessionInvalid" && error.reason === "expired")
    }))

  it.effect("no cookie is no match; a short secret is refused", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* authenticate(strategy, noHeaders))._tag, "NoMatch")
      assert.strictEqual((yield* Effect.flip(Session.issueSession(alice, "short")))._tag, "SessionSecretTooShort")
      assert.throws(() => Session.passwordSessionStrategy({ secret: "short" }))
    }))

  it.effect("composeAuthStrategies: first match wins, a failed verdict stops the chain", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      const fixed = (id: string, verdict: AuthStrategy.Verdict): AuthStrategy.AuthStrategy => ({
        id,
        outboundHosts: [`${id}.example`],
        authenticate: () => Effect.sync(() => (calls.push(id), verdict))
      })
      const bob = Subject.make({ type: "user", id: "bob", tenantId: "t" })
      const chain = AuthStrategy.composeAuthStrategies([
        strategy,
        fixed("none", AuthStrategy.Verdict.NoMatch()),
        fixed("fails", AuthStrategy.Verdict.Failed({ reason: "bad token" })),
        fixed("later", AuthStrategy.Verdict.Authenticated({ subject: bob }))
      ])
      const value = yield* Session.issueSession(alice, secret)
      const first = yield* authenticate(chain, withCookie(value))
      assert.isTrue(first._tag === "Authenticated" && first.subject.id === "alice")
      assert.deepStrictEqual(calls, [])
      const stopped = yield* authenticate(chain, noHeaders)
      assert.strictEqual(stopped._tag, "Failed")
      assert.deepStrictEqual(calls, ["none", "fails"])
      assert.deepStrictEqual(chain.outboundHosts, ["none.example", "fails.example", "later.example"])
    }))
})
