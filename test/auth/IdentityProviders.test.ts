import { FetchHttpClient, Headers } from "@effect/platform"
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schema, TestClock } from "effect"
import * as jose from "jose"
import { createHmac, createPublicKey } from "node:crypto"
import * as AuthStrategy from "../../src/auth/AuthStrategy.js"
import {
  idpAStrategy,
  idpBStrategy,
  idpCStrategy,
  idpDStrategy,
  idpEStrategy,
  jwtBearerStrategy,
  oidcStrategy
} from "../../src/auth/IdentityProviders.js"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import * as Jwks from "../../src/auth/Jwks.js"
import * as Session from "../../src/auth/Session.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Serve from "../support/Serve.js"
import * as Idp from "./support/Idp.js"

const authenticate = (strategy: AuthStrategy.AuthStrategy, headers: Record<string, string>) =>
  strategy.authenticate({ headers: Headers.fromInput(headers) }).pipe(Effect.provide(FetchHttpClient.layer))
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
const nowSeconds = () => Math.floor(Date.now() / 1000)
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

const expectTenant = (verdict: AuthStrategy.Verdict, tenantId: string, provider: string) => {
  assert.strictEqual(verdict._tag, "Authenticated", verdict._tag === "Failed" ? verdict.reason : "")
  if (verdict._tag !== "Authenticated") return
  assert.strictEqual(verdict.subject.tenantId, tenantId)
  assert.strictEqual(verdict.subject.metadata.provider, provider)
}
const expectFailed = (verdict: AuthStrategy.Verdict) => assert.strictEqual(verdict._tag, "Failed")

describe("a real OpenID provider on loopback", () => {
  it.scopedLive("oidcStrategy finds the keys by discovery and verifies a provider-issued token", () =>
    Effect.gen(function*() {
      const rsa = yield* Idp.generateKey("RS256", "rs-1")
      const op = yield* Idp.oidcProvider([rsa], { realm_access: { tenant: "acme" }, "https://fw.example/tenant": "acme" })
      const token = yield* Effect.promise(op.accessToken)
      const viaDiscovery = oidcStrategy({ id: "corp", issuer: op.issuer, audience: "https://api.example.test", tenantClaim: "realm_access.tenant" })
      const verdict = yield* authenticate(viaDiscovery, bearer(token))
      expectTenant(verdict, "acme", "corp")
      if (verdict._tag === "Authenticated") assert.includeMembers([...verdict.subject.scopes], ["notes:read", "notes:write"])
      const namespaced = oidcStrategy({ id: "corp", issuer: op.issuer, audience: "https://api.example.test", tenantClaim: "https://fw.example/tenant", jwksUrl: op.jwksUrl })
      expectTenant(yield* authenticate(namespaced, bearer(token)), "acme", "corp")
      const wrongAudience = oidcStrategy({ id: "corp", issuer: op.issuer, audience: "https://other.test", tenantClaim: "realm_access.tenant" })
      expectFailed(yield* authenticate(wrongAudience, bearer(token)))
    }))

  it.scopedLive("jwtBearerStrategy verifies the same token by JWKS URL; a null tenant is a failed verdict", () =>
    Effect.gen(function*() {
      const rsa = yield* Idp.generateKey("RS256", "rs-2")
      const op = yield* Idp.oidcProvider([rsa], { org: { id: "globex" } })
      const token = yield* Effect.promise(op.accessToken)
      const strategy = (tenant: (claims: jose.JWTPayload) => string | null) =>
        jwtBearerStrategy({ id: "generic", jwksUrl: op.jwksUrl, issuer: op.issuer, audience: "https://api.example.test", tenantIdFromClaims: tenant })
      expectTenant(yield* authenticate(strategy((c) => (c.org as { id?: string } | undefined)?.id ?? null), bearer(token)), "globex", "generic")
      expectFailed(yield* authenticate(strategy(() => null), bearer(token)))
      assert.strictEqual((yield* authenticate(strategy(() => "x"), {}))._tag, "NoMatch")
    }))
})

describe("provider-shaped tokens", () => {
  it.scopedLive("each provider strategy accepts its provider's token shape, from the header or its cookie", () =>
    Effect.gen(function*() {
      const rsa = yield* Idp.generateKey("RS256", "k-rs")
      const ec = yield* Idp.generateKey("ES256", "k-ec")
      // The loopback OpenID provider publishes both keys at its /jwks; shaped tokens are signed with them.
      const op = yield* Idp.oidcProvider([rsa, ec], {})
      const jwks = { url: op.jwksUrl }
      const exp = nowSeconds() + 300
      const api = "https://api.idp-a.test"
      const a = idpAStrategy({ clientId: "client_1", apiBaseUrl: api, jwksUrl: jwks.url })
      const legacy = yield* Idp.sign(rsa, { sub: "user_1", iss: api, org_id: "org_a", role: "admin", permissions: ["notes:write"], exp })
      const current = yield* Idp.sign(rsa, { sub: "user_1", iss: `${api}/user_management/client_1`, org_id: "org_a", exp })
      expectTenant(yield* authenticate(a, bearer(legacy)), "org_a", "idp_a")
      expectTenant(yield* authenticate(a, { cookie: `idp_a-session=${current}` }), "org_a", "idp_a")

      const b = idpBStrategy({ issuer: "https://acme.idp-b.test", jwksUrl: jwks.url })
      const bToken = yield* Idp.sign(rsa, { sub: "kp_1", iss: "https://acme.idp-b.test", aud: [], org_code: "org_b", exp })
      const bIdToken = yield* Idp.sign(rsa, { sub: "kp_1", iss: "https://acme.idp-b.test", org_codes: ["org_b2"], exp })
      expectTenant(yield* authenticate(b, { cookie: `idp_b_access_token=${bToken}` }), "org_b", "idp_b")
      expectTenant(yield* authenticate(b, bearer(bIdToken)), "org_b2", "idp_b")

      const c = idpCStrategy({ frontendApi: "https://clerk.idp-c.test", jwksUrl: jwks.url })
      const v2 = yield* Idp.sign(rsa, { sub: "user_c", iss: "https://clerk.idp-c.test", o: { id: "org_c2" }, nbf: nowSeconds() - 1, exp })
      const v1 = yield* Idp.sign(rsa, { sub: "user_c", iss: "https://clerk.idp-c.test", org_id: "org_c1", exp })
      expectTenant(yield* authenticate(c, { cookie: `__session=${v2}` }), "org_c2", "idp_c")
      expectTenant(yield* authenticate(c, bearer(v1)), "org_c1", "idp_c")

      const d = idpDStrategy({ domain: "acme.idp-d.test", audience: "https://api.acme.test", jwksUrl: jwks.url })
      const dToken = yield* Idp.sign(rsa, { sub: "auth0|1", iss: "https://acme.idp-d.test/", aud: ["https://api.acme.test", "https://acme.idp-d.test/userinfo"], "https://fw.dev/tenant": "org_d", exp })
      const noSlash = yield* Idp.sign(rsa, { sub: "auth0|1", iss: "https://acme.idp-d.test", aud: "https://api.acme.test", "https://fw.dev/tenant": "org_d", exp })
      expectTenant(yield* authenticate(d, bearer(dToken)), "org_d", "idp_d")
      expectFailed(yield* authenticate(d, bearer(noSlash)))
      assert.strictEqual((yield* authenticate(d, { cookie: `__session=${dToken}` }))._tag, "NoMatch")

      const e = idpEStrategy({ projectRef: "abcd", jwksUrl: jwks.url })
      const eToken = yield* Idp.sign(ec, { sub: "uuid-1", iss: "https://abcd.supabase.co/auth/v1", aud: "authenticated", app_metadata: { tenant_id: "org_e" }, user_metadata: { tenant_id: "evil" }, exp })
      expectTenant(yield* authenticate(e, bearer(eToken)), "org_e", "idp_e")
      const cognito = oidcStrategy({ id: "pool", issuer: "https://pool.test", audience: "app", tenantClaim: "custom:tenant_id", jwksUrl: jwks.url })
      const pool = yield* Idp.sign(rsa, { sub: "p1", iss: "https://pool.test", aud: "app", "custom:tenant_id": "org_p", exp })
      expectTenant(yield* authenticate(cognito, bearer(pool)), "org_p", "pool")
      assert.deepStrictEqual(a.outboundHosts, [new URL(jwks.url).host])
    }))

  it.effect("the shared-secret verifier is separate: HS256 only with jwtSecret", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const secret = "super-secret-jwt-key-for-legacy-projects"
      const token = yield* Effect.promise(() =>
        new jose.SignJWT({ sub: "u", iss: "https://self.test/auth/v1", aud: "authenticated", app_metadata: { tenant_id: "t" }, exp: nowSeconds() + 60 })
          .setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(secret))
      )
      const e = idpEStrategy({ jwtSecret: secret, issuer: "https://self.test/auth/v1" })
      expectTenant(yield* authenticate(e, bearer(token)), "t", "idp_e")
      expectFailed(yield* authenticate(idpEStrategy({ jwtSecret: "another-secret-entirely-0123456789", issuer: "https://self.test/auth/v1" }), bearer(token)))
      assert.throws(() => jwtBearerStrategy({ id: "x", jwksUrl: "http://127.0.0.1/j", issuer: "i", audience: "a", tenantIdFromClaims: () => "t", algorithms: ["HS256" as never] }))
    }))
})

describe("key rotation and refetch storms", () => {
  it.scoped("a rotated key verifies after one refetch; unknown kids refetch at most once per cooldown", () =>
    Effect.gen(function*() {
      const old = yield* Idp.generateKey("RS256", "old")
      const next = yield* Idp.generateKey("RS256", "next")
      const jwks = yield* Idp.jwksServer([old])
      yield* TestClock.setTime(Date.now())
      const strategy = jwtBearerStrategy({ id: "r", jwksUrl: jwks.url, issuer: "https://r.test", audience: "api", tenantIdFromClaims: (c) => (c.tid as string) ?? null, jwks: { cooldownMs: 30_000 } })
      const claims = { sub: "u", iss: "https://r.test", aud: "api", tid: "t", exp: nowSeconds() + 3600 }
      expectTenant(yield* authenticate(strategy, bearer(yield* Idp.sign(old, claims))), "t", "r")
      assert.strictEqual(jwks.fetches(), 1)
      // The provider rotates: tokens signed with the new key arrive.
      jwks.setKeys([old, next])
      const rotated = yield* Idp.sign(next, claims)
      yield* TestClock.adjust("31 seconds")
      expectTenant(yield* authenticate(strategy, bearer(rotated)), "t", "r")
      assert.strictEqual(jwks.fetches(), 2)
      // A storm of unknown kids within the cooldown: no further fetch.
      const storm = yield* Effect.forEach(Array.from({ length: 50 }, (_, i) => i), (i) =>
        Effect.flatMap(Idp.generateKey("RS256", `rogue-${i}`), (rogue) => Idp.sign(rogue, claims)))
      const verdicts = yield* Effect.forEach(storm, (token) => authenticate(strategy, bearer(token)), { concurrency: 10 })
      assert.isTrue(verdicts.every((v) => v._tag === "Failed"))
      assert.strictEqual(jwks.fetches(), 2)
      yield* TestClock.adjust("31 seconds")
      yield* authenticate(strategy, bearer(storm[0]!))
      yield* authenticate(strategy, bearer(storm[1]!))
      assert.strictEqual(jwks.fetches(), 3)
      assert.strictEqual(Jwks.fetchCount(jwks.url), 3)
    }))
})

class Rejections extends Context.Tag("test/Rejections")<Rejections, {
  readonly strategy: AuthStrategy.AuthStrategy
  readonly good: string
  readonly cases: Readonly<Record<string, string>>
}>() {}

const rejectionCases = [
  "alg none",
  "HS256 keyed with the public key",
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
  "oversized",
  "missing tenant",
  "missing subject",
  "garbage"
] as const

const RejectionsLive = Layer.scoped(
  Rejections,
  Effect.gen(function*() {
    const key = yield* Idp.generateKey("RS256", "good")
    const attacker = yield* Idp.generateKey("RS256", "good")
    const jwks = yield* Idp.jwksServer([key])
    const strategy = jwtBearerStrategy({ id: "j", jwksUrl: jwks.url, issuer: "https://j.test", audience: "api", tenantIdFromClaims: (c) => (c.tid as string) ?? null })
    const claims = { sub: "u", iss: "https://j.test", aud: "api", tid: "t", exp: nowSeconds() + 300 }
    const good = yield* Idp.sign(key, claims)
    const [header, payload, signature] = good.split(".") as [string, string, string]
    const publicPem = createPublicKey(key.privateKey as unknown as Parameters<typeof createPublicKey>[0]).export({ type: "spki", format: "pem" }).toString()
    const hsHeader = b64({ alg: "HS256", kid: "good", typ: "JWT" })
    const cases: Record<(typeof rejectionCases)[number], string> = {
      "alg none": `${b64({ alg: "none", typ: "JWT" })}.${payload}.`,
      "HS256 keyed with the public key": `${hsHeader}.${payload}.${createHmac("sha256", publicPem).update(`${hsHeader}.${payload}`).digest("base64url")}`,
      "embedded jwk header": yield* Idp.sign(attacker, claims, { jwk: { kty: "RSA", n: String(attacker.privateJwk.n), e: String(attacker.privateJwk.e) } }),
      "jku header": yield* Idp.sign(attacker, claims, { jku: "http://127.0.0.1:1/evil.json" }),
      "x5u header": yield* Idp.sign(attacker, claims, { x5u: "http://127.0.0.1:1/evil.pem" }),
      expired: yield* Idp.sign(key, { ...claims, exp: nowSeconds() - 60 }),
      "not yet valid": yield* Idp.sign(key, { ...claims, nbf: nowSeconds() + 600 }),
      "missing exp": yield* Idp.sign(key, { sub: "u", iss: "https://j.test", aud: "api", tid: "t" }),
      "wrong issuer": yield* Idp.sign(key, { ...claims, iss: "https://evil.test" }),
      "wrong audience": yield* Idp.sign(key, { ...claims, aud: "other" }),
      "unknown kid": yield* Idp.sign(key, claims, { kid: "nope" }),
      "tampered payload": `${header}.${b64({ ...claims, tid: "other-tenant" })}.${signature}`,
      "stripped signature": `${header}.${payload}.`,
      oversized: yield* Idp.sign(key, { ...claims, pad: "x".repeat(20_000) }),
      "missing tenant": yield* Idp.sign(key, { sub: claims.sub, iss: claims.iss, aud: claims.aud, exp: claims.exp }),
      "missing subject": yield* Idp.sign(key, { iss: claims.iss, aud: claims.aud, tid: claims.tid, exp: claims.exp }),
      garbage: "not.a.jwt"
    }
    return { strategy, good, cases }
  })
)

layer(RejectionsLive, { timeout: 30_000, excludeTestServices: true })("rejections", (it) => {
  it.effect("the well-formed token is accepted (the cases below differ from it in one way each)", () =>
    Effect.gen(function*() {
      const { good, strategy } = yield* Rejections
      expectTenant(yield* authenticate(strategy, bearer(good)), "t", "j")
    }))
  for (const name of rejectionCases) {
    it.effect(`refuses: ${name}`, () =>
      Effect.gen(function*() {
        const { cases, strategy } = yield* Rejections
        expectFailed(yield* authenticate(strategy, bearer(cases[name])))
      }))
  }
})

describe("composed strategies over the rpc socket and POST /rpc", () => {
  it.scopedLive("password session first, then a provider: the token rides in each message; a bad token stops the chain", () =>
    Effect.gen(function*() {
      const secret = "compose-session-secret-0123456789abcdef"
      const key = yield* Idp.generateKey("ES256", "es")
      const jwks = yield* Idp.jwksServer([key])
      const whoAmI = query("auth.whoAmI", {
        input: Schema.Struct({}),
        output: Schema.Struct({ id: Schema.String, provider: Schema.NullOr(Schema.String) }),
        handler: (_, { subject }) =>
          Effect.succeed({ id: subject.id, provider: typeof subject.metadata.provider === "string" ? subject.metadata.provider : null })
      })
      const app = defineApp({
        procedures: [whoAmI],
        auth: [
          Session.passwordSessionStrategy({ secret }),
          jwtBearerStrategy({ id: "idp", jwksUrl: jwks.url, issuer: "https://idp.test", audience: "api", tenantIdFromClaims: (c) => (c.org as string) ?? null })
        ]
      })
      const served = yield* Serve.serve(app, Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal)))
      const ws = yield* Serve.wsClient(served, app)
      const http = yield* Serve.httpClient(served, app)
      const cookie = `fw:session=${yield* Session.issueSession(Subject.make({ type: "user", id: "local-user", tenantId: "t" }), secret)}`
      const token = yield* Idp.sign(key, { sub: "idp-user", iss: "https://idp.test", aud: "api", org: "t", exp: nowSeconds() + 60 })
      assert.deepStrictEqual(yield* ws.call(whoAmI, {}, { headers: { cookie } }), { id: "local-user", provider: null })
      assert.deepStrictEqual(yield* ws.call(whoAmI, {}, { headers: bearer(token) }), { id: "idp-user", provider: "idp" })
      // Both present: the first strategy in the chain wins.
      assert.deepStrictEqual(yield* ws.call(whoAmI, {}, { headers: { cookie, ...bearer(token) } }), { id: "local-user", provider: null })
      // A tampered session fails the chain even though a valid bearer token follows.
      const stopped = yield* Effect.flip(ws.call(whoAmI, {}, { headers: { cookie: `${cookie}x`, ...bearer(token) } }))
      assert.strictEqual(stopped._tag, "Unauthenticated")
      assert.deepStrictEqual(yield* ws.call(whoAmI, {}), { id: "anonymous", provider: null })
      // The same chain over HTTP (POST /rpc), where the headers are the request's own.
      assert.deepStrictEqual(yield* http.call(whoAmI, {}, { headers: bearer(token) }), { id: "idp-user", provider: "idp" })
      assert.strictEqual((yield* Effect.flip(http.call(whoAmI, {}, { headers: { cookie: `${cookie}x`, ...bearer(token) } })))._tag, "Unauthenticated")
    }))
})
