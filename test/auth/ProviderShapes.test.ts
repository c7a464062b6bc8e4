/**
 * Each provider strategy against tokens shaped like its provider's (issuer format, audience
 * behaviour, tenant claim, cookie). The keys are published by a real OpenID provider on loopback;
 * it mints the shapes it can (every token with an audience), and the shapes without `aud`
 * (providers A and C) are signed with its private keys.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import * as jose from "jose"
import {
  idpAClaims,
  idpAStrategy,
  idpBStrategy,
  idpCStrategy,
  idpDStrategy,
  idpEStrategy,
  jwtBearerStrategy,
  oidcStrategy
} from "../../src/auth/IdentityProviders.js"
import { StrategyConfigInvalid } from "../../src/auth/JwtStrategy.js"
import * as Idp from "./support/Idp.js"
import { authenticate, bearer, expectFailed, expectSubject } from "./support/Verdicts.js"

class Provider extends Context.Tag("test/Provider")<Provider, {
  readonly op: Idp.LoopbackProvider
  readonly rsa: Idp.SigningKey
  readonly ec: Idp.SigningKey
}>() {}

const ProviderLive = Layer.scoped(
  Provider,
  Effect.gen(function*() {
    const rsa = yield* Idp.generateKey("RS256", "k-rs")
    const ec = yield* Idp.generateKey("ES256", "k-ec")
    return { op: yield* Idp.oidcProvider([rsa, ec]), rsa, ec }
  })
)

const exp = () => Idp.nowSeconds() + 300

layer(ProviderLive, { timeout: 30_000, excludeTestServices: true })("provider-shaped tokens", (it) => {
  it.effect("idp_a: both issuer formats, no audience, header or idp_a-session cookie, tenant org_id, typed claims", () =>
    Effect.gen(function*() {
      const { op, rsa } = yield* Provider
      const api = "https://api.idp-a.test"
      const strategy = idpAStrategy({ clientId: "client_1", apiBaseUrl: api, jwksUrl: op.jwksUrl })
      const claims = { sub: "user_1", org_id: "org_a", role: "admin", permissions: ["notes:write"], email: "ada@acme.test", sid: "session_1", exp: exp() }
      const legacy = yield* Idp.sign(rsa, { ...claims, iss: api })
      const current = yield* Idp.sign(rsa, { ...claims, iss: `${api}/user_management/client_1` })
      const subject = expectSubject(yield* authenticate(strategy, bearer(legacy)), "org_a", "idp_a")
      expectSubject(yield* authenticate(strategy, { cookie: `idp_a-session=${current}` }), "org_a", "idp_a")
      assert.deepStrictEqual(subject.scopes, ["notes:write"])
      assert.deepStrictEqual(idpAClaims(subject), Option.some({ sub: "user_1", email: "ada@acme.test", org_id: "org_a", role: "admin", permissions: ["notes:write"] }))
      // A custom auth domain is another issuer: refused unless configured.
      const custom = yield* Idp.sign(rsa, { ...claims, iss: "https://auth.acme.test" })
      expectFailed(yield* authenticate(strategy, bearer(custom)), "(iss)")
      const configured = idpAStrategy({ clientId: "client_1", jwksUrl: op.jwksUrl, issuer: "https://auth.acme.test" })
      expectSubject(yield* authenticate(configured, bearer(custom)), "org_a", "idp_a")
      const withoutOrg = yield* Idp.sign(rsa, { sub: "user_2", iss: api, exp: exp() })
      expectFailed(yield* authenticate(strategy, bearer(withoutOrg)), "names no tenant")
      const fallback = idpAStrategy({ clientId: "client_1", apiBaseUrl: api, jwksUrl: op.jwksUrl, defaultTenantId: "personal" })
      expectSubject(yield* authenticate(fallback, bearer(withoutOrg)), "personal", "idp_a")
      assert.deepStrictEqual(idpAStrategy({ clientId: "c" }).outboundHosts, ["api.workos.com"])
    }))

  it.effect("idp_b: provider-minted access token (empty aud list, org_code) from its cookie; ID-token shape (org_codes)", () =>
    Effect.gen(function*() {
      const { op } = yield* Provider
      const issuer = "https://acme.idp-b.test"
      const strategy = idpBStrategy({ issuer, jwksUrl: op.jwksUrl })
      const access = yield* op.mint({ iss: issuer, aud: [], claims: { org_code: "org_b", permissions: ["read:notes"] }, header: { typ: "JWT" } })
      const subject = expectSubject(yield* authenticate(strategy, { cookie: `idp_b_access_token=${access}` }), "org_b", "idp_b")
      assert.includeMembers([...subject.scopes], ["read:notes", "notes:read"])
      const idToken = yield* op.mint({ iss: issuer, aud: "client_b", claims: { org_codes: ["org_b2", "org_b3"] } })
      expectSubject(yield* authenticate(strategy, bearer(idToken)), "org_b2", "idp_b")
      // With an audience configured, the empty list no longer passes.
      expectFailed(yield* authenticate(idpBStrategy({ issuer, jwksUrl: op.jwksUrl, audience: "https://api.acme.test" }), bearer(access)), "(aud)")
      assert.deepStrictEqual(idpBStrategy({ issuer }).outboundHosts, ["acme.idp-b.test"])
    }))

  it.effect("idp_c: no audience, __session cookie, tenant org_id then o.id, azp checked when configured", () =>
    Effect.gen(function*() {
      const { op, rsa } = yield* Provider
      const frontendApi = "https://clerk.idp-c.test"
      const strategy = idpCStrategy({ frontendApi, jwksUrl: op.jwksUrl })
      const base = { sub: "user_c", iss: frontendApi, azp: "https://app.acme.test", sid: "sess_1", nbf: Idp.nowSeconds() - 5, exp: Idp.nowSeconds() + 60 }
      const v1 = yield* Idp.sign(rsa, { ...base, org_id: "org_c1", org_role: "admin" })
      const v2 = yield* Idp.sign(rsa, { ...base, v: 2, o: { id: "org_c2", rol: "admin", slg: "acme" } })
      expectSubject(yield* authenticate(strategy, { cookie: `__session=${v2}` }), "org_c2", "idp_c")
      expectSubject(yield* authenticate(strategy, bearer(v1)), "org_c1", "idp_c")
      const both = yield* Idp.sign(rsa, { ...base, org_id: "org_c1", o: { id: "org_c2" } })
      expectSubject(yield* authenticate(strategy, bearer(both)), "org_c1", "idp_c")
      const parties = idpCStrategy({ frontendApi, jwksUrl: op.jwksUrl, authorizedParties: ["https://app.acme.test"] })
      expectSubject(yield* authenticate(parties, bearer(v2)), "org_c2", "idp_c")
      const elsewhere = yield* Idp.sign(rsa, { ...base, azp: "https://evil.test", o: { id: "org_c2" } })
      expectFailed(yield* authenticate(parties, bearer(elsewhere)), "authorized party")
      assert.deepStrictEqual(strategy.outboundHosts, [new URL(op.jwksUrl).host])
      assert.deepStrictEqual(idpCStrategy({ frontendApi }).outboundHosts, ["clerk.idp-c.test"])
    }))

  it.effect("idp_d: provider-minted token, issuer with its trailing slash, audience list, namespaced tenant, header only", () =>
    Effect.gen(function*() {
      const { op } = yield* Provider
      const strategy = idpDStrategy({ domain: "acme.idp-d.test", audience: "https://api.acme.test", jwksUrl: op.jwksUrl })
      const claims = { "https://fw.dev/tenant": "org_d", org_id: "org_auth0", permissions: ["read:notes"] }
      const token = yield* op.mint({ iss: "https://acme.idp-d.test/", aud: ["https://api.acme.test", "https://acme.idp-d.test/userinfo"], claims })
      expectSubject(yield* authenticate(strategy, bearer(token)), "org_d", "idp_d")
      const noSlash = yield* op.mint({ iss: "https://acme.idp-d.test", aud: "https://api.acme.test", claims })
      expectFailed(yield* authenticate(strategy, bearer(noSlash)), "(iss)")
      assert.strictEqual((yield* authenticate(strategy, { cookie: `__session=${token}` }))._tag, "NoMatch")
      const byOrg = idpDStrategy({ domain: "acme.idp-d.test", audience: "https://api.acme.test", jwksUrl: op.jwksUrl, tenantClaim: "org_id" })
      expectSubject(yield* authenticate(byOrg, bearer(token)), "org_auth0", "idp_d")
      assert.deepStrictEqual(idpDStrategy({ domain: "acme.idp-d.test", audience: "a" }).outboundHosts, ["acme.idp-d.test"])
    }))

  it.effect("idp_e: provider-minted ES256 token, audience authenticated, tenant app_metadata.tenant_id (never user_metadata)", () =>
    Effect.gen(function*() {
      const { op } = yield* Provider
      const strategy = idpEStrategy({ projectRef: "abcd", jwksUrl: op.jwksUrl })
      const claims = { role: "authenticated", aal: "aal1", app_metadata: { tenant_id: "org_e" }, user_metadata: { tenant_id: "evil" } }
      const token = yield* op.mint({ alg: "ES256", iss: "https://abcd.supabase.co/auth/v1", aud: "authenticated", claims })
      assert.strictEqual(jose.decodeProtectedHeader(token).alg, "ES256")
      expectSubject(yield* authenticate(strategy, bearer(token)), "org_e", "idp_e")
      assert.strictEqual((yield* authenticate(strategy, { cookie: `sb-abcd-auth-token=${token}` }))._tag, "NoMatch")
      const onlyUserMetadata = yield* op.mint({ alg: "ES256", iss: "https://abcd.supabase.co/auth/v1", aud: "authenticated", claims: { user_metadata: { tenant_id: "evil" } } })
      expectFailed(yield* authenticate(strategy, bearer(onlyUserMetadata)), "names no tenant")
      const anon = yield* op.mint({ alg: "ES256", iss: "https://abcd.supabase.co/auth/v1", aud: "anon", claims })
      expectFailed(yield* authenticate(strategy, bearer(anon)), "(aud)")
      const selfHosted = idpEStrategy({ jwksUrl: op.jwksUrl, issuer: "https://auth.acme.test/auth/v1" })
      const own = yield* op.mint({ alg: "ES256", iss: "https://auth.acme.test/auth/v1", aud: "authenticated", claims })
      expectSubject(yield* authenticate(selfHosted, bearer(own)), "org_e", "idp_e")
      assert.deepStrictEqual(idpEStrategy({ projectRef: "abcd" }).outboundHosts, ["abcd.supabase.co"])
    }))

  it.effect("generic OIDC tenant claims: exact names with colons and URLs, dotted paths, tid, hd", () =>
    Effect.gen(function*() {
      const { op } = yield* Provider
      const api = "https://api.acme.test"
      const token = yield* op.mint({
        aud: api,
        claims: {
          "custom:tenant_id": "pool-tenant",
          "https://example.com/tenant": "namespaced-tenant",
          realm_access: { tenant: "realm-tenant", roles: ["user"] },
          tid: "directory-tenant",
          hd: "acme.test",
          "dotted.name": "exact-wins"
        }
      })
      const cases: ReadonlyArray<readonly [string, string]> = [
        ["custom:tenant_id", "pool-tenant"],
        ["https://example.com/tenant", "namespaced-tenant"],
        ["realm_access.tenant", "realm-tenant"],
        ["tid", "directory-tenant"],
        ["hd", "acme.test"],
        ["dotted.name", "exact-wins"]
      ]
      for (const [tenantClaim, tenant] of cases) {
        const strategy = oidcStrategy({ id: "corp", issuer: op.issuer, audience: api, tenantClaim, jwksUrl: op.jwksUrl })
        expectSubject(yield* authenticate(strategy, bearer(token)), tenant, "corp")
      }
      for (const tenantClaim of ["realm_access.roles", "realm_access.missing", "realm_access.tenant.x", "constructor"]) {
        const strategy = oidcStrategy({ id: "corp", issuer: op.issuer, audience: api, tenantClaim, jwksUrl: op.jwksUrl })
        expectFailed(yield* authenticate(strategy, bearer(token)), "names no tenant")
      }
    }))
})

describe("the shared-secret path and construction refusals", () => {
  it.effect("idpEStrategy({jwtSecret}) is the one HS256 verifier, separate from any JWKS", () =>
    Effect.gen(function*() {
      const secret = "super-secret-jwt-key-for-legacy-projects"
      const sign = (key: string, claims: jose.JWTPayload) =>
        Effect.promise(() => new jose.SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "JWT" }).sign(new TextEncoder().encode(key)))
      const claims = { sub: "u", iss: "https://self.test/auth/v1", aud: "authenticated", app_metadata: { tenant_id: "t" }, exp: Idp.nowSeconds() + 60 }
      const token = yield* sign(secret, claims)
      const strategy = idpEStrategy({ jwtSecret: secret, issuer: "https://self.test/auth/v1" })
      expectSubject(yield* authenticate(strategy, bearer(token)), "t", "idp_e")
      assert.deepStrictEqual(strategy.outboundHosts, [])
      const hosted = idpEStrategy({ jwtSecret: secret, projectRef: "abcd" })
      expectSubject(yield* authenticate(hosted, bearer(yield* sign(secret, { ...claims, iss: "https://abcd.supabase.co/auth/v1" }))), "t", "idp_e")
      const other = idpEStrategy({ jwtSecret: "another-secret-entirely-0123456789", issuer: "https://self.test/auth/v1" })
      expectFailed(yield* authenticate(other, bearer(token)), "ERR_JWS_SIGNATURE_VERIFICATION_FAILED")
      const { exp: _exp, ...withoutExp } = claims
      expectFailed(yield* authenticate(strategy, bearer(yield* sign(secret, withoutExp))), "(exp)")
      expectFailed(yield* authenticate(strategy, bearer(yield* sign(secret, { ...claims, app_metadata: {} }))), "names no tenant")
      // The same token never passes a JWKS strategy.
      const jwksPath = idpEStrategy({ jwksUrl: "http://127.0.0.1:9/jwks", issuer: "https://self.test/auth/v1" })
      expectFailed(yield* authenticate(jwksPath, bearer(token)), "ERR_JOSE_ALG_NOT_ALLOWED")
    }))

  it("configurations are refused at construction with StrategyConfigInvalid", () => {
    const jwks = { id: "x", jwksUrl: "http://127.0.0.1:9/jwks", issuer: "i", audience: "a", tenantIdFromClaims: () => "t" }
    for (const algorithms of [["HS256"], ["none"], ["RS256", "HS512"], []]) {
      // The cast stands for a configuration read from untyped input.
      assert.throws(() => jwtBearerStrategy({ ...jwks, algorithms: algorithms as Array<"RS256"> }), StrategyConfigInvalid)
    }
    assert.throws(() => oidcStrategy({ id: "corp", issuer: "https://i.test", audience: "a" }), StrategyConfigInvalid)
    assert.doesNotThrow(() => oidcStrategy({ id: "corp", issuer: "https://i.test", audience: "a", defaultTenantId: "t" }))
    assert.throws(() => idpEStrategy({ jwtSecret: "too-short", issuer: "https://self.test/auth/v1" }), StrategyConfigInvalid)
  })
})
