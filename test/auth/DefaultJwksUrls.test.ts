/**
 * The default JWKS URL of each provider strategy (spec table 2.5), as the full URL the strategy
 * fetches: every strategy is configured with its required options only, verifies a real token,
 * and the one key-set request it makes is recorded (then answered by a loopback JWKS server, since
 * the providers' hosts are not reachable from a test).
 */
import { FetchHttpClient, Headers, HttpClient, HttpClientRequest } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import type * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { claimNamespace, idpAStrategy, idpBStrategy, idpCStrategy, idpDStrategy, idpEStrategy } from "../../src/auth/IdentityProviders.js"
import * as Idp from "./support/Idp.js"
import { bearer, expectSubject } from "./support/Verdicts.js"

/** A loopback server publishing `keys` as a JWKS at any path. */
const jwksServer = (keys: ReadonlyArray<Idp.SigningKey>) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly close: () => void }>((resolve) => {
        const body = JSON.stringify({ keys: keys.map((key) => Idp.publicJwk(key.privateJwk)) })
        const server = createServer((_, response) => response.writeHead(200, { "content-type": "application/json" }).end(body))
        server.listen(0, "127.0.0.1", () =>
          resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`, close: () => server.close() }))
      })
    ),
    (server) => Effect.sync(server.close)
  )

/** Runs `strategy` with an HttpClient that records each requested URL and sends it to `loopback`. */
const authenticateRecording = (strategy: AuthStrategy.AuthStrategy, token: string, loopback: string) =>
  Effect.gen(function*() {
    const requested: Array<string> = []
    const recording = Layer.effect(
      HttpClient.HttpClient,
      Effect.map(HttpClient.HttpClient, (client) =>
        HttpClient.mapRequest(client, (request) => {
          requested.push(request.url)
          return HttpClientRequest.setUrl(request, loopback)
        }))
    ).pipe(Layer.provide(FetchHttpClient.layer))
    const verdict = yield* strategy.authenticate({ headers: Headers.fromInput(bearer(token)) }).pipe(Effect.provide(recording))
    return { verdict, requested }
  })

// A distinct host per run: the JWKS cache is per URL and per process.
const run = Math.random().toString(36).slice(2, 8)
const exp = () => Idp.nowSeconds() + 300

describe("default JWKS URLs (spec 2.5)", () => {
  it.scopedLive("idp_a …/sso/jwks/<clientId>; idp_b <issuer>/.well-known/jwks; idp_c <frontendApi>/.well-known/jwks.json; idp_d https://<domain>/.well-known/jwks.json; idp_e https://<ref>.supabase.co/auth/v1/.well-known/jwks.json", () =>
    Effect.gen(function*() {
      const rsa = yield* Idp.generateKey("RS256", "k-default-rs")
      const ec = yield* Idp.generateKey("ES256", "k-default-ec")
      const server = yield* jwksServer([rsa, ec])
      const cases: ReadonlyArray<{
        readonly strategy: AuthStrategy.AuthStrategy
        readonly provider: string
        readonly claims: Record<string, unknown>
        readonly key: Idp.SigningKey
        readonly jwksUrl: string
        readonly tenant: string
      }> = [
        {
          strategy: idpAStrategy({ clientId: `client_${run}`, apiBaseUrl: `https://api-${run}.idp-a.test` }),
          provider: "idp_a",
          claims: { iss: `https://api-${run}.idp-a.test`, org_id: "org_a" },
          key: rsa,
          jwksUrl: `https://api-${run}.idp-a.test/sso/jwks/client_${run}`,
          tenant: "org_a"
        },
        {
          strategy: idpBStrategy({ issuer: `https://acme-${run}.idp-b.test` }),
          provider: "idp_b",
          claims: { iss: `https://acme-${run}.idp-b.test`, org_code: "org_b" },
          key: rsa,
          jwksUrl: `https://acme-${run}.idp-b.test/.well-known/jwks`,
          tenant: "org_b"
        },
        {
          strategy: idpCStrategy({ frontendApi: `https://acme-${run}.idp-c.test` }),
          provider: "idp_c",
          claims: { iss: `https://acme-${run}.idp-c.test`, org_id: "org_c" },
          key: rsa,
          jwksUrl: `https://acme-${run}.idp-c.test/.well-known/jwks.json`,
          tenant: "org_c"
        },
        {
          strategy: idpDStrategy({ domain: `acme-${run}.idp-d.test`, audience: "https://api.acme.test" }),
          provider: "idp_d",
          claims: { iss: `https://acme-${run}.idp-d.test/`, aud: "https://api.acme.test", [`${claimNamespace}/tenant`]: "org_d" },
          key: rsa,
          jwksUrl: `https://acme-${run}.idp-d.test/.well-known/jwks.json`,
          tenant: "org_d"
        },
        {
          strategy: idpEStrategy({ projectRef: `ref${run}` }),
          provider: "idp_e",
          claims: { iss: `https://ref${run}.supabase.co/auth/v1`, aud: "authenticated", app_metadata: { tenant_id: "org_e" } },
          key: ec,
          jwksUrl: `https://ref${run}.supabase.co/auth/v1/.well-known/jwks.json`,
          tenant: "org_e"
        }
      ]
      for (const { claims, jwksUrl, key, provider, strategy, tenant } of cases) {
        const token = yield* Idp.sign(key, { sub: `user-${provider}`, exp: exp(), ...claims })
        const { requested, verdict } = yield* authenticateRecording(strategy, token, server.url)
        expectSubject(verdict, tenant, provider)
        assert.deepStrictEqual(requested, [jwksUrl], provider)
        assert.deepStrictEqual(strategy.outboundHosts, [new URL(jwksUrl).host], provider)
      }
    }))
})
