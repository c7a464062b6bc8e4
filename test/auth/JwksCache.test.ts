/**
 * The JWKS cache and token times, driven by the Effect Clock (TestClock) against a JWKS server on
 * loopback whose answers the test controls and whose fetches it counts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import * as jose from "jose"
import type * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { jwtBearerStrategy } from "../../src/auth/IdentityProviders.js"
import * as Jwks from "../../src/auth/Jwks.js"
import * as Idp from "./support/Idp.js"
import { authenticate, bearer, expectFailed, expectSubject } from "./support/Verdicts.js"

const issuer = "https://idp.test"
const claims = (extra: Record<string, unknown> = {}) => ({ sub: "u", iss: issuer, aud: "api", tid: "t", exp: Idp.nowSeconds() + 3600, ...extra })

/** A key, a JWKS server publishing it, a strategy over it, and a token it signed. */
const setup = (jwks: Jwks.Options = {}, clockToleranceSeconds?: number) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(Date.now())
    const key = yield* Idp.generateKey("ES256", "k1")
    const server = yield* Idp.jwksServer([key])
    const strategy = jwtBearerStrategy({
      id: "j",
      jwksUrl: server.url,
      issuer,
      audience: "api",
      tenantIdFromClaims: (c) => typeof c.tid === "string" ? c.tid : null,
      jwks,
      ...(clockToleranceSeconds === undefined ? {} : { clockToleranceSeconds })
    })
    return { key, server, strategy, good: yield* Idp.sign(key, claims()) }
  })

const unknownKids = (key: Idp.SigningKey, count: number) =>
  Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) => Idp.sign({ ...key, kid: `unknown-${i}` }, claims()))

const all = (strategy: AuthStrategy.AuthStrategy, tokens: ReadonlyArray<string>) =>
  Effect.forEach(tokens, (token) => authenticate(strategy, bearer(token)), { concurrency: "unbounded" })

describe("JWKS cache", () => {
  it.scoped("concurrent first requests share one fetch; a warm set is not fetched again", () =>
    Effect.gen(function*() {
      const { good, server, strategy } = yield* setup()
      for (const verdict of yield* all(strategy, Array.from({ length: 20 }, () => good))) expectSubject(verdict, "t", "j")
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
      assert.deepStrictEqual([server.fetches(), Jwks.fetchCount(server.url)], [1, 1])
    }))

  it.scoped("a storm of unknown kids refetches at most once per cooldown, measured by the Effect Clock", () =>
    Effect.gen(function*() {
      const { good, key, server, strategy } = yield* setup({ cooldownMs: 10_000 })
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
      const storm = yield* unknownKids(key, 50)
      for (const verdict of yield* all(strategy, storm)) expectFailed(verdict, "ERR_JWKS_NO_MATCHING_KEY")
      assert.strictEqual(server.fetches(), 1)
      yield* TestClock.adjust("9999 millis")
      yield* all(strategy, storm)
      assert.strictEqual(server.fetches(), 1)
      yield* TestClock.adjust("1 millis")
      yield* all(strategy, storm)
      assert.strictEqual(server.fetches(), 2)
      yield* all(strategy, storm)
      assert.strictEqual(server.fetches(), 2)
    }))

  it.scoped("a cooldown of 0 is raised to 1 second", () =>
    Effect.gen(function*() {
      const { good, key, server, strategy } = yield* setup({ cooldownMs: 0 })
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
      const storm = yield* unknownKids(key, 50)
      yield* all(strategy, storm)
      assert.strictEqual(server.fetches(), 1)
      yield* TestClock.adjust("1 second")
      yield* all(strategy, storm)
      assert.strictEqual(server.fetches(), 2)
    }))

  it.scoped("a set older than maxAgeMs is refetched; while that fails the cached keys serve, and a later fetch drops retired keys", () =>
    Effect.gen(function*() {
      const { good, server, strategy } = yield* setup({ maxAgeMs: 60_000 })
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
      server.answer({ _tag: "status", status: 503 })
      yield* TestClock.adjust("60 seconds")
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
      assert.strictEqual(server.fetches(), 2)
      yield* TestClock.adjust("1 second")
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
      assert.strictEqual(server.fetches(), 3)
      // The provider comes back having retired the key.
      server.setKeys([yield* Idp.generateKey("ES256", "k2")])
      yield* TestClock.adjust("1 second")
      expectFailed(yield* authenticate(strategy, bearer(good)), "ERR_JWKS_NO_MATCHING_KEY")
      assert.strictEqual(server.fetches(), 4)
    }))

  it.scoped("a key set that cannot be loaded fails the verdict, and the URL is asked at most once a second", () =>
    Effect.gen(function*() {
      const { good, key, server, strategy } = yield* setup()
      server.answer({ _tag: "status", status: 500 })
      for (const verdict of yield* all(strategy, Array.from({ length: 20 }, () => good))) {
        expectFailed(verdict, "the identity provider's key set is unavailable")
        // The reason may reach the client: it does not name the (possibly internal) URL.
        assert.notInclude(JSON.stringify(verdict), new URL(server.url).host)
      }
      assert.strictEqual(server.fetches(), 1)
      yield* TestClock.adjust("1 second")
      expectFailed(yield* authenticate(strategy, bearer(good)), "key set is unavailable")
      assert.strictEqual(server.fetches(), 2)
      server.setKeys([key])
      expectFailed(yield* authenticate(strategy, bearer(good)), "key set is unavailable")
      yield* TestClock.adjust("1 second")
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
      assert.strictEqual(server.fetches(), 3)
    }))

  it.scoped("a JWKS endpoint that does not answer times out by the Effect Clock", () =>
    Effect.gen(function*() {
      const { good, server, strategy } = yield* setup({ timeoutMs: 2_000 })
      server.answer({ _tag: "hang" })
      const arrival = server.nextRequest()
      const fiber = yield* Effect.fork(authenticate(strategy, bearer(good)))
      yield* arrival
      yield* TestClock.adjust("2 seconds")
      expectFailed(yield* Fiber.join(fiber), "no answer within 2000 ms")
    }))

  it.scoped("a redirect from the JWKS URL is not followed", () =>
    Effect.gen(function*() {
      const { good, key, server, strategy } = yield* setup()
      const elsewhere = yield* Idp.jwksServer([key])
      server.answer({ _tag: "redirect", location: elsewhere.url })
      expectFailed(yield* authenticate(strategy, bearer(good)), "status 302")
      assert.strictEqual(elsewhere.fetches(), 0)
    }))
})

describe("key selection", () => {
  it.scoped("a forged payload under a header that verified before still fails the signature check", () =>
    Effect.gen(function*() {
      const { good, strategy } = yield* setup()
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
      const [header, , signature] = good.split(".") as [string, string, string]
      const forged = Buffer.from(JSON.stringify(claims({ tid: "other" }))).toString("base64url")
      expectFailed(yield* authenticate(strategy, bearer(`${header}.${forged}.${signature}`)), "ERR_JWS_SIGNATURE_VERIFICATION_FAILED")
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
    }))

  it.scoped("a token without a kid verifies when one key fits, and is refused when several do", () =>
    Effect.gen(function*() {
      const { key, server, strategy } = yield* setup()
      const { kid: _kid, ...withoutKid } = { alg: key.alg, kid: key.kid, typ: "JWT" }
      const noKid = yield* Effect.promise(() => new jose.SignJWT(claims()).setProtectedHeader(withoutKid).sign(key.privateKey))
      expectSubject(yield* authenticate(strategy, bearer(noKid)), "t", "j")
      const other = yield* Idp.jwksServer([key, yield* Idp.generateKey("ES256", "k2")])
      const two = jwtBearerStrategy({ id: "j", jwksUrl: other.url, issuer, audience: "api", tenantIdFromClaims: () => "t" })
      expectFailed(yield* authenticate(two, bearer(noKid)), "ERR_JWKS_MULTIPLE_MATCHING_KEYS")
      assert.strictEqual(server.fetches(), 1)
    }))
})

describe("token times", () => {
  it.scoped("exp and nbf are checked against the Effect Clock with a 5 second tolerance", () =>
    Effect.gen(function*() {
      const { key, strategy } = yield* setup()
      const soon = yield* Idp.sign(key, claims({ exp: Idp.nowSeconds() + 60 }))
      const early = yield* Idp.sign(key, claims({ nbf: Idp.nowSeconds() + 4 }))
      const tooEarly = yield* Idp.sign(key, claims({ nbf: Idp.nowSeconds() + 30 }))
      expectSubject(yield* authenticate(strategy, bearer(early)), "t", "j")
      expectFailed(yield* authenticate(strategy, bearer(tooEarly)), "(nbf)")
      yield* TestClock.adjust("30 seconds")
      expectSubject(yield* authenticate(strategy, bearer(tooEarly)), "t", "j")
      yield* TestClock.adjust("33 seconds")
      expectSubject(yield* authenticate(strategy, bearer(soon)), "t", "j")
      yield* TestClock.adjust("3 seconds")
      expectFailed(yield* authenticate(strategy, bearer(soon)), "ERR_JWT_EXPIRED")
    }))

  it.scoped("the tolerance is configurable", () =>
    Effect.gen(function*() {
      const { key, strategy: lenient } = yield* setup({}, 120)
      const soon = yield* Idp.sign(key, claims({ exp: Idp.nowSeconds() + 60 }))
      yield* TestClock.adjust("150 seconds")
      assert.strictEqual((yield* authenticate(lenient, bearer(soon)))._tag, "Authenticated")
    }))
})
