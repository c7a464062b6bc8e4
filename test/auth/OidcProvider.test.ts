/**
 * Verification against a real OpenID provider (`oidc-provider`) on loopback: discovery, JWKS,
 * tokens the provider issues, and the provider rotating its keys.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, TestClock } from "effect"
import * as jose from "jose"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as Discovery from "../../src/auth/Discovery.js"
import { jwtBearerStrategy, oidcStrategy } from "../../src/auth/IdentityProviders.js"
import * as Idp from "./support/Idp.js"
import { authenticate, bearer, expectFailed, expectSubject } from "./support/Verdicts.js"

const api = "https://api.example.test"
const discoveryPath = "/.well-known/openid-configuration"

/** Serves one discovery document at `/custom/openid`, counting requests. */
const documentServer = (document: { readonly issuer: string; readonly jwks_uri: string }) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      let requests = 0
      const server = createServer((_req, res) => {
        requests++
        res.setHeader("content-type", "application/json")
        res.end(JSON.stringify(document))
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
      return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/custom/openid`, requests: () => requests }
    }),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )

describe("a real OpenID provider on loopback", () => {
  it.scopedLive("oidcStrategy finds the keys by discovery, once, and verifies a token the provider issued", () =>
    Effect.gen(function*() {
      const op = yield* Idp.oidcProvider([yield* Idp.generateKey("RS256", "rs-1")])
      const token = yield* op.mint({ aud: api, claims: { realm_access: { tenant: "acme" } } })
      const strategy = oidcStrategy({ id: "corp", issuer: op.issuer, audience: api, tenantClaim: "realm_access.tenant" })
      const subject = expectSubject(yield* authenticate(strategy, bearer(token)), "acme", "corp")
      assert.strictEqual(subject.id, "svc")
      assert.strictEqual(subject.type, "user")
      assert.includeMembers([...subject.scopes], ["notes:read", "notes:write"])
      const claims = subject.metadata.claims as jose.JWTPayload
      assert.deepStrictEqual([claims.iss, claims.client_id], [op.issuer, "svc"])
      assert.deepStrictEqual([op.requests(discoveryPath), Discovery.fetchCount(op.issuer)], [1, 1])
      // The discovery document is cached for the process, across strategies; the key set stays warm.
      const again = oidcStrategy({ id: "corp2", issuer: op.issuer, audience: api, tenantClaim: "realm_access.tenant" })
      expectSubject(yield* authenticate(again, bearer(token)), "acme", "corp2")
      expectSubject(yield* authenticate(strategy, bearer(token)), "acme", "corp")
      assert.strictEqual(op.requests(discoveryPath), 1)
      assert.strictEqual(op.requests(new URL(op.jwksUrl).pathname), 1)
      assert.deepStrictEqual(strategy.outboundHosts, [new URL(op.issuer).host])
    }))

  it.scopedLive("oidcStrategy refuses a provider token for another audience, and a token without its tenant claim", () =>
    Effect.gen(function*() {
      const op = yield* Idp.oidcProvider([yield* Idp.generateKey("ES256", "es-1")])
      const token = yield* op.mint({ aud: api, alg: "ES256", claims: { tid: "dir-1" } })
      const other = oidcStrategy({ id: "corp", issuer: op.issuer, audience: "https://other.test", tenantClaim: "tid" })
      expectFailed(yield* authenticate(other, bearer(token)), "ERR_JWT_CLAIM_VALIDATION_FAILED (aud)")
      const noTenant = oidcStrategy({ id: "corp", issuer: op.issuer, audience: api, tenantClaim: "org.id" })
      expectFailed(yield* authenticate(noTenant, bearer(token)), "names no tenant")
      expectSubject(yield* authenticate(oidcStrategy({ id: "corp", issuer: op.issuer, audience: api, tenantClaim: "tid" }), bearer(token)), "dir-1", "corp")
    }))

  it.scopedLive("jwksUrl skips discovery; discoveryUrl replaces the document path", () =>
    Effect.gen(function*() {
      const op = yield* Idp.oidcProvider([yield* Idp.generateKey("RS256", "rs-2")])
      const token = yield* op.mint({ aud: api, claims: { hd: "acme.test" } })
      const direct = oidcStrategy({ id: "ws", issuer: op.issuer, audience: api, tenantClaim: "hd", jwksUrl: op.jwksUrl })
      expectSubject(yield* authenticate(direct, bearer(token)), "acme.test", "ws")
      assert.strictEqual(op.requests(discoveryPath), 0)
      const document = yield* documentServer({ issuer: op.issuer, jwks_uri: op.jwksUrl })
      const custom = oidcStrategy({ id: "ws", issuer: op.issuer, audience: api, tenantClaim: "hd", discoveryUrl: document.url })
      expectSubject(yield* authenticate(custom, bearer(token)), "acme.test", "ws")
      assert.deepStrictEqual([document.requests(), op.requests(discoveryPath)], [1, 0])
      assert.deepStrictEqual(custom.outboundHosts, [new URL(document.url).host])
    }))

  it.scopedLive("a discovery document naming another issuer is refused", () =>
    Effect.gen(function*() {
      const op = yield* Idp.oidcProvider([yield* Idp.generateKey("RS256", "rs-3")])
      const token = yield* op.mint({ aud: api, claims: { hd: "acme.test" } })
      const document = yield* documentServer({ issuer: "https://evil.test", jwks_uri: op.jwksUrl })
      const strategy = oidcStrategy({ id: "ws", issuer: op.issuer, audience: api, tenantClaim: "hd", discoveryUrl: document.url })
      // The client sees a fixed reason with no URL; the log keeps which issuer the document named.
      const logs: Array<string> = []
      const logger = Logger.make(({ message }) => logs.push(String(message)))
      const verdict = yield* authenticate(strategy, bearer(token)).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      expectFailed(verdict, "the identity provider's discovery document is unavailable: the document names another issuer")
      assert.isTrue(verdict._tag === "Failed" && !/evil\.test|https?:|127\.0\.0\.1/.test(verdict.reason), JSON.stringify(verdict))
      assert.isTrue(logs.some((line) => line.includes("https://evil.test")), JSON.stringify(logs))
      assert.strictEqual(op.requests(new URL(op.jwksUrl).pathname), 0)
    }))

  it.scopedLive("jwtBearerStrategy verifies the provider's token by JWKS URL; the tenant function decides", () =>
    Effect.gen(function*() {
      const op = yield* Idp.oidcProvider([yield* Idp.generateKey("RS256", "rs-4")])
      const token = yield* op.mint({ aud: api, claims: { org: { id: "globex" } } })
      const strategy = (tenant: (claims: jose.JWTPayload) => string | null, cookieName?: string) =>
        jwtBearerStrategy({
          id: "generic",
          jwksUrl: op.jwksUrl,
          issuer: op.issuer,
          audience: api,
          tenantIdFromClaims: tenant,
          ...(cookieName === undefined ? {} : { cookieName })
        })
      const orgOf = (claims: jose.JWTPayload) => (claims.org as { readonly id?: string } | undefined)?.id ?? null
      expectSubject(yield* authenticate(strategy(orgOf), bearer(token)), "globex", "generic")
      expectFailed(yield* authenticate(strategy(() => null), bearer(token)), "names no tenant")
      // Header only by default; a cookie only when one is named.
      assert.strictEqual((yield* authenticate(strategy(orgOf), { cookie: `token=${token}` }))._tag, "NoMatch")
      expectSubject(yield* authenticate(strategy(orgOf, "token"), { cookie: `token=${token}` }), "globex", "generic")
      assert.strictEqual((yield* authenticate(strategy(orgOf), {}))._tag, "NoMatch")
      assert.deepStrictEqual(strategy(orgOf).outboundHosts, [new URL(op.jwksUrl).host])
    }))

  it.scoped("the provider rotates keys: the new key verifies after one refetch; unknown-kid storms refetch at most once per cooldown", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const old = yield* Idp.generateKey("RS256", "old")
      const next = yield* Idp.generateKey("RS256", "next")
      const op = yield* Idp.oidcProvider([old])
      const jwksPath = new URL(op.jwksUrl).pathname
      const strategy = jwtBearerStrategy({
        id: "rot",
        jwksUrl: op.jwksUrl,
        issuer: op.issuer,
        audience: api,
        tenantIdFromClaims: () => "t",
        jwks: { cooldownMs: 30_000 }
      })
      const before = yield* op.mint({ aud: api })
      expectSubject(yield* authenticate(strategy, bearer(before)), "t", "rot")
      assert.strictEqual(op.requests(jwksPath), 1)

      // The provider rotates: the new key signs, the old one is still published for a while.
      op.rotate([next, old])
      const after = yield* op.mint({ aud: api })
      assert.strictEqual(jose.decodeProtectedHeader(after).kid, "next")
      expectSubject(yield* authenticate(strategy, bearer(before)), "t", "rot")
      // Within the cooldown of the first fetch the unknown kid is refused without a fetch...
      expectFailed(yield* authenticate(strategy, bearer(after)), "ERR_JWKS_NO_MATCHING_KEY")
      assert.strictEqual(op.requests(jwksPath), 1)
      // ...and once it has passed, one refetch picks up the new key.
      yield* TestClock.adjust("30 seconds")
      expectSubject(yield* authenticate(strategy, bearer(after)), "t", "rot")
      expectSubject(yield* authenticate(strategy, bearer(after)), "t", "rot")
      assert.strictEqual(op.requests(jwksPath), 2)

      // A storm of tokens with unknown kids: no fetch inside the cooldown, then exactly one.
      const rogue = yield* Idp.generateKey("ES256", "rogue")
      const storm = yield* Effect.forEach(Array.from({ length: 40 }, (_, i) => i), (i) =>
        Idp.sign({ ...rogue, kid: `rogue-${i}` }, { sub: "x", iss: op.issuer, aud: api, exp: Idp.nowSeconds() + 300 }))
      const wave = () => Effect.forEach(storm, (token) => authenticate(strategy, bearer(token)), { concurrency: 10 })
      for (const verdict of yield* wave()) expectFailed(verdict, "ERR_JWKS_NO_MATCHING_KEY")
      assert.strictEqual(op.requests(jwksPath), 2)
      yield* TestClock.adjust("30 seconds")
      for (const verdict of yield* wave()) expectFailed(verdict, "ERR_JWKS_NO_MATCHING_KEY")
      assert.strictEqual(op.requests(jwksPath), 3)
      expectSubject(yield* authenticate(strategy, bearer(after)), "t", "rot")
      assert.strictEqual(op.requests(jwksPath), 3)
    }))
})
