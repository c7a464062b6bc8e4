/**
 * Identity providers on loopback for tests: a real OpenID provider (`oidc-provider`) issuing real
 * tokens, and a bare JWKS server whose keys a test can rotate and whose fetches it can count.
 */
import { Effect } from "effect"
import * as jose from "jose"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Provider } from "oidc-provider"

/** A private signing key with its kid and algorithm. */
export interface SigningKey {
  readonly kid: string
  readonly alg: "RS256" | "ES256"
  readonly privateJwk: jose.JWK
  readonly privateKey: CryptoKey
}

/** Generates a signing key. */
export const generateKey = (alg: "RS256" | "ES256", kid: string) =>
  Effect.promise(async (): Promise<SigningKey> => {
    const { privateKey } = await jose.generateKeyPair(alg, { extractable: true })
    return { kid, alg, privateKey: privateKey as CryptoKey, privateJwk: { ...(await jose.exportJWK(privateKey)), kid, alg, use: "sig" } }
  })

const publicJwk = ({ d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...rest }: jose.JWK) => rest

/** Signs claims with `key` (for provider token shapes oidc-provider cannot mint, such as tokens without `aud`). */
export const sign = (key: SigningKey, claims: jose.JWTPayload, header: Partial<jose.JWTHeaderParameters> = {}) =>
  Effect.promise(() =>
    new jose.SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JWT", ...header }).sign(key.privateKey)
  )

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      server.close(() => resolve(port))
    })
  })

/** A real OpenID provider on loopback. */
export const oidcProvider = (keys: ReadonlyArray<SigningKey>, claims: jose.JWTPayload) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const port = await freePort()
      const issuer = `http://127.0.0.1:${port}`
      const provider = new Provider(issuer, {
        jwks: { keys: keys.map((k) => k.privateJwk) as Array<jose.JWK> },
        clients: [{
          client_id: "svc",
          client_secret: "svc-secret",
          grant_types: ["client_credentials"],
          response_types: [],
          redirect_uris: [],
          token_endpoint_auth_method: "client_secret_post"
        }],
        features: {
          devInteractions: { enabled: false },
          clientCredentials: { enabled: true },
          resourceIndicators: {
            enabled: true,
            defaultResource: () => "https://api.example.test",
            useGrantedResource: () => true,
            getResourceServerInfo: (_ctx: unknown, resource: string) => ({
              scope: "notes:read notes:write",
              audience: resource,
              accessTokenTTL: 300,
              accessTokenFormat: "jwt",
              jwt: { sign: { alg: "RS256" } }
            })
          }
        },
        formats: {
          customizers: {
            jwt: async (_ctx: unknown, _token: unknown, jwt: { payload: Record<string, unknown> }) => {
              Object.assign(jwt.payload, claims)
            }
          }
        }
      } as never)
      const server = provider.listen(port, "127.0.0.1")
      await new Promise((resolve) => server.once("listening", resolve))
      /** A real access token from the token endpoint (client credentials). */
      const accessToken = async () => {
        const response = await fetch(`${issuer}/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            grant_type: "client_credentials",
            client_id: "svc",
            client_secret: "svc-secret",
            resource: "https://api.example.test",
            scope: "notes:read notes:write"
          })
        })
        const body = await response.json() as { access_token?: string }
        if (!body.access_token) throw new Error(`token endpoint: ${JSON.stringify(body)}`)
        return body.access_token
      }
      return { issuer, jwksUrl: `${issuer}/jwks`, server, accessToken }
    }),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )

/** A bare JWKS server: `setKeys` rotates, `fetches` counts requests. */
export const jwksServer = (initial: ReadonlyArray<SigningKey>) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      let keys = initial
      let fetches = 0
      const server = createServer((_req, res) => {
        fetches++
        res.setHeader("content-type", "application/json")
        res.end(JSON.stringify({ keys: keys.map((k) => publicJwk(k.privateJwk)) }))
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
      const port = (server.address() as AddressInfo).port
      return {
        url: `http://127.0.0.1:${port}/jwks-${Math.random().toString(36).slice(2)}`,
        server,
        setKeys: (next: ReadonlyArray<SigningKey>) => void (keys = next),
        fetches: () => fetches
      }
    }),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )
