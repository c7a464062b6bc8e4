/**
 * The JWT attack checklist (notes/auth-providers-saml.md §3): each hostile token differs from an
 * accepted one in one way, and must fail for its own reason.
 */
import { layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import type * as jose from "jose"
import { createHmac, createPublicKey } from "node:crypto"
import type * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { jwtBearerStrategy } from "../../src/auth/IdentityProviders.js"
import * as Idp from "./support/Idp.js"
import { authenticate, bearer, expectFailed, expectSubject } from "./support/Verdicts.js"

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

/** Each case: the hostile token and the reason it must fail for. */
type Cases = Readonly<Record<string, { readonly token: string; readonly because: string }>>

class Fixture extends Context.Tag("test/Rejections")<Fixture, {
  readonly strategy: AuthStrategy.AuthStrategy
  readonly esOnly: AuthStrategy.AuthStrategy
  readonly good: string
  readonly cases: Cases
}>() {}

const names = [
  "alg none",
  "HS256 signed with the public key",
  "embedded jwk header",
  "jku header",
  "x5u header",
  "expired",
  "not yet valid",
  "missing exp",
  "wrong issuer",
  "wrong audience",
  "unknown kid",
  "tampered payload",
  "stripped signature",
  "oversized token",
  "missing tenant",
  "missing subject",
  "ES256 header on the RSA key",
  "not a JWT"
] as const

const FixtureLive = Layer.scoped(
  Fixture,
  Effect.gen(function*() {
    const key = yield* Idp.generateKey("RS256", "good")
    // The attacker's key claims the real kid.
    const attacker = yield* Idp.generateKey("RS256", "good")
    const op = yield* Idp.oidcProvider([key])
    const api = "https://api.example.test"
    const options = { id: "j", jwksUrl: op.jwksUrl, issuer: op.issuer, audience: api, tenantIdFromClaims: (claims: jose.JWTPayload) => typeof claims.tid === "string" ? claims.tid : null }
    const strategy = jwtBearerStrategy(options)
    const claims = { sub: "u", iss: op.issuer, aud: api, tid: "t", exp: Idp.nowSeconds() + 300 }
    const good = yield* Idp.sign(key, claims)
    const [header, payload, signature] = good.split(".") as [string, string, string]
    const publicPem = createPublicKey({ key: Idp.publicJwk(key.privateJwk), format: "jwk" }).export({ type: "spki", format: "pem" }).toString()
    const hsHeader = b64({ alg: "HS256", kid: "good", typ: "JWT" })
    const { exp: _exp, ...withoutExp } = claims
    const { tid: _tid, ...withoutTenant } = claims
    const { sub: _sub, ...withoutSubject } = claims
    const cases: Record<(typeof names)[number], { token: string; because: string }> = {
      "alg none": { token: `${b64({ alg: "none", typ: "JWT" })}.${payload}.`, because: "ERR_JOSE_ALG_NOT_ALLOWED" },
      "HS256 signed with the public key": {
        token: `${hsHeader}.${payload}.${createHmac("sha256", publicPem).update(`${hsHeader}.${payload}`).digest("base64url")}`,
        because: "ERR_JOSE_ALG_NOT_ALLOWED"
      },
      "embedded jwk header": {
        token: yield* Idp.sign(attacker, claims, { jwk: Idp.publicJwk(attacker.privateJwk) }),
        because: "ERR_JWS_SIGNATURE_VERIFICATION_FAILED"
      },
      "jku header": {
        token: yield* Idp.sign(attacker, claims, { jku: `${op.issuer}/evil.json` }),
        because: "ERR_JWS_SIGNATURE_VERIFICATION_FAILED"
      },
      "x5u header": {
        token: yield* Idp.sign(attacker, claims, { x5u: `${op.issuer}/evil.pem` }),
        because: "ERR_JWS_SIGNATURE_VERIFICATION_FAILED"
      },
      expired: { token: yield* Idp.sign(key, { ...claims, exp: Idp.nowSeconds() - 60 }), because: "ERR_JWT_EXPIRED (exp)" },
      "not yet valid": { token: yield* Idp.sign(key, { ...claims, nbf: Idp.nowSeconds() + 600 }), because: "ERR_JWT_CLAIM_VALIDATION_FAILED (nbf)" },
      "missing exp": { token: yield* Idp.sign(key, withoutExp), because: "ERR_JWT_CLAIM_VALIDATION_FAILED (exp)" },
      "wrong issuer": { token: yield* Idp.sign(key, { ...claims, iss: "https://evil.test" }), because: "ERR_JWT_CLAIM_VALIDATION_FAILED (iss)" },
      "wrong audience": { token: yield* Idp.sign(key, { ...claims, aud: "https://other.test" }), because: "ERR_JWT_CLAIM_VALIDATION_FAILED (aud)" },
      "unknown kid": { token: yield* Idp.sign(key, claims, { kid: "nope" }), because: "ERR_JWKS_NO_MATCHING_KEY" },
      "tampered payload": { token: `${header}.${b64({ ...claims, tid: "other-tenant" })}.${signature}`, because: "ERR_JWS_SIGNATURE_VERIFICATION_FAILED" },
      "stripped signature": { token: `${header}.${payload}.`, because: "ERR_JWS_SIGNATURE_VERIFICATION_FAILED" },
      // Not even a JWT: refused by size before any decoding could fail on it.
      "oversized token": { token: "x".repeat(16 * 1024 + 1), because: "larger than 16384 bytes" },
      "missing tenant": { token: yield* Idp.sign(key, withoutTenant), because: "names no tenant" },
      "missing subject": { token: yield* Idp.sign(key, withoutSubject), because: "no subject" },
      "ES256 header on the RSA key": { token: `${b64({ alg: "ES256", kid: "good", typ: "JWT" })}.${payload}.${signature}`, because: "ERR_JWKS_NO_MATCHING_KEY" },
      "not a JWT": { token: "not.a.jwt", because: "ERR_JWS_INVALID" }
    }
    const esOnly = jwtBearerStrategy({ ...options, algorithms: ["ES256"] })
    return { strategy, esOnly, good, cases }
  })
)

layer(FixtureLive, { timeout: 30_000, excludeTestServices: true })("JWT rejections", (it) => {
  it.effect("the well-formed token is accepted (each case below differs from it in one way)", () =>
    Effect.gen(function*() {
      const { good, strategy } = yield* Fixture
      expectSubject(yield* authenticate(strategy, bearer(good)), "t", "j")
    }))

  for (const name of names) {
    it.effect(`refuses: ${name}`, () =>
      Effect.gen(function*() {
        const { cases, strategy } = yield* Fixture
        const { because, token } = cases[name]!
        expectFailed(yield* authenticate(strategy, bearer(token)), because)
      }))
  }

  it.effect("refuses: an algorithm outside the strategy's allow-list", () =>
    Effect.gen(function*() {
      const { esOnly, good } = yield* Fixture
      expectFailed(yield* authenticate(esOnly, bearer(good)), "ERR_JOSE_ALG_NOT_ALLOWED")
    }))

  it.effect("a 16 KiB token is still read; the limit is strict", () =>
    Effect.gen(function*() {
      const { strategy } = yield* Fixture
      expectFailed(yield* authenticate(strategy, bearer("x".repeat(16 * 1024))), "ERR_JWS_INVALID")
    }))
})
