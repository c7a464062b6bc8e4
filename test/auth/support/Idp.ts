/**
 * Identity providers on loopback for tests: a real OpenID provider (`oidc-provider`) issuing real
 * tokens in any provider's shape and able to rotate its keys, and a bare JWKS server whose answers
 * a test controls and whose fetches it counts.
 */
import { Effect } from "effect"
import * as jose from "jose"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import type { AdapterFactory, AdapterPayload, Configuration } from "oidc-provider"

/**
 * oidc-provider warns on import (`console.warn`, once per process) that it wants Node.js 22 LTS or
 * later; the tests also run on Node 20, where every flow used here works. It is a test dependency (the
 * framework never loads it), so that one line is noise in the test output: it is dropped, and any
 * other warning printed while the module loads still goes through.
 */
const { default: Provider } = await (async () => {
  const warn = console.warn
  console.warn = (...args: Array<unknown>) => {
    if (typeof args[0] === "string" && args[0].includes("oidc-provider WARNING: Unsupported runtime")) return
    warn(...args)
  }
  try {
    return await import("oidc-provider")
  } finally {
    console.warn = warn
  }
})()
type Provider = InstanceType<typeof Provider>

/**
 * A Map of the provider's records, as its built-in in-memory adapter keeps them. Given explicitly
 * because the built-in one prints, for every provider made, that it must not be used in production:
 * these providers live for one test.
 */
const memoryAdapter = (): AdapterFactory => {
  const records = new Map<string, AdapterPayload>()
  return (model) => {
    const key = (id: string) => `${model}:${id}`
    const where = (test: (payload: AdapterPayload) => boolean) =>
      [...records].find(([at, payload]) => at.startsWith(`${model}:`) && test(payload))?.[1]
    return {
      upsert: async (id, payload) => void records.set(key(id), payload),
      find: async (id) => records.get(key(id)),
      findByUserCode: async (userCode) => where((payload) => payload.userCode === userCode),
      findByUid: async (uid) => where((payload) => payload.uid === uid),
      consume: async (id) => {
        const payload = records.get(key(id))
        if (payload !== undefined) records.set(key(id), { ...payload, consumed: Math.floor(Date.now() / 1000) })
      },
      destroy: async (id) => void records.delete(key(id)),
      revokeByGrantId: async (grantId) => {
        for (const [at, payload] of records) if (payload.grantId === grantId) records.delete(at)
      }
    }
  }
}

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
    return { kid, alg, privateKey, privateJwk: { ...(await jose.exportJWK(privateKey)), kid, alg, use: "sig" } }
  })

/** The public half of a key, as a JWKS serves it. */
export const publicJwk = ({ d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...rest }: jose.JWK): jose.JWK => rest

/** Signs claims with `key` (for token shapes oidc-provider cannot mint: tokens without `aud`, hostile headers). */
export const sign = (key: SigningKey, claims: jose.JWTPayload, header: Partial<jose.JWTHeaderParameters> = {}) =>
  Effect.promise(() =>
    new jose.SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JWT", ...header }).sign(key.privateKey)
  )

/** Seconds since the epoch, by the wall clock (tokens minted by real providers use it too). */
export const nowSeconds = () => Math.floor(Date.now() / 1000)

const listen = (handler: (req: IncomingMessage, res: ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const server = createServer(handler)
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
      return { server, port: (server.address() as AddressInfo).port }
    }),
    ({ server }) =>
      Effect.promise(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))))
  )

/** What a minted access token looks like: the provider's own claims, overridden by these. */
export interface Shape {
  readonly iss?: string
  /** Any truthy value (oidc-provider refuses tokens without an audience); default the resource. */
  readonly aud?: string | ReadonlyArray<string>
  readonly claims?: jose.JWTPayload
  readonly header?: Record<string, unknown>
  readonly alg?: "RS256" | "ES256"
  /** Which of the provider's keys signs (default the first of `alg`). */
  readonly kid?: string
}

/** A real OpenID provider on loopback (client credentials, JWT access tokens). */
export interface LoopbackProvider {
  readonly issuer: string
  readonly jwksUrl: string
  readonly discoveryUrl: string
  /** Requests served at `path` so far. */
  readonly requests: (path: string) => number
  /** A real access token from the token endpoint, in `shape`. */
  readonly mint: (shape?: Shape) => Effect.Effect<string>
  /** Replaces the provider with one holding `keys` (the first key of each algorithm signs from now on). */
  readonly rotate: (keys: ReadonlyArray<SigningKey>) => void
}

/** Starts a real OpenID provider on 127.0.0.1 (port 0) publishing `keys` at `/jwks`. */
export const oidcProvider = (keys: ReadonlyArray<SigningKey>) =>
  Effect.gen(function*() {
    const counts = new Map<string, number>()
    const shapes = new Map<string, Shape>()
    let current: Provider | undefined
    const { port } = yield* listen((req, res) => {
      const path = new URL(req.url ?? "/", "http://op").pathname
      counts.set(path, (counts.get(path) ?? 0) + 1)
      void current!.callback()(req, res)
    })
    const issuer = `http://127.0.0.1:${port}`
    // A fresh JWKS path: the process-wide key cache must not mix providers that reuse a port.
    const jwksPath = `/jwks-${crypto.randomUUID()}`
    const configuration = (signing: ReadonlyArray<SigningKey>): Configuration => ({
      routes: { jwks: jwksPath },
      adapter: memoryAdapter(),
      // Said explicitly: the default function prints a notice asking for it.
      ttl: { ClientCredentials: 300 },
      jwks: { keys: signing.map((key) => key.privateJwk) as Array<jose.JWK & { kty: "RSA" | "EC" }> },
      clients: [{
        client_id: "svc",
        client_secret: "svc-secret",
        grant_types: ["client_credentials"],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: "client_secret_post",
        // The provider refuses a client whose ID-token algorithm it has no key for.
        id_token_signed_response_alg: signing[0]?.alg ?? "RS256"
      }],
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => "https://api.example.test",
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx, resource) => {
            const shape = shapes.get(resource) ?? {}
            return {
              scope: "notes:read notes:write",
              audience: resource,
              accessTokenTTL: 300,
              accessTokenFormat: "jwt",
              jwt: { sign: { alg: shape.alg ?? "RS256", ...(shape.kid === undefined ? {} : { kid: shape.kid }) } }
            }
          }
        }
      },
      formats: {
        customizers: {
          jwt: async (_ctx, _token, jwt) => {
            const shape = shapes.get(String(jwt.payload.aud)) ?? {}
            if (shape.iss !== undefined) jwt.payload.iss = shape.iss
            if (shape.aud !== undefined) jwt.payload.aud = shape.aud as string | Array<string>
            Object.assign(jwt.payload, shape.claims ?? {})
            if (shape.header !== undefined) jwt.header = { ...jwt.header, ...shape.header }
          }
        }
      }
    })
    const start = (signing: ReadonlyArray<SigningKey>) => {
      current = new Provider(issuer, configuration(signing))
    }
    start(keys)
    let minted = 0
    const mint = (shape: Shape = {}) =>
      Effect.promise(async () => {
        // Each token gets its own resource URL, which keys its shape in the hooks above.
        const resource = `https://api.example.test/${++minted}`
        shapes.set(resource, shape)
        const response = await fetch(`${issuer}/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            grant_type: "client_credentials",
            client_id: "svc",
            client_secret: "svc-secret",
            resource,
            scope: "notes:read notes:write"
          })
        })
        const body = await response.json() as { access_token?: string }
        if (!body.access_token) throw new Error(`token endpoint: ${JSON.stringify(body)}`)
        return body.access_token
      })
    const provider: LoopbackProvider = {
      issuer,
      jwksUrl: `${issuer}${jwksPath}`,
      discoveryUrl: `${issuer}/.well-known/openid-configuration`,
      requests: (path) => counts.get(path) ?? 0,
      mint,
      rotate: start
    }
    return provider
  })

/** What a bare JWKS server publishes of a key: the public half of its JWK (any key type, any size). */
export type PublishedKey = Pick<SigningKey, "privateJwk">

/** What a bare JWKS server answers. */
export type JwksAnswer =
  | { readonly _tag: "keys"; readonly keys: ReadonlyArray<PublishedKey> }
  | { readonly _tag: "status"; readonly status: number }
  | { readonly _tag: "redirect"; readonly location: string }
  | { readonly _tag: "hang" }

/** A bare JWKS server: `answer` changes what it serves, `fetches` counts requests, `nextRequest` waits for one. */
export const jwksServer = (initial: ReadonlyArray<PublishedKey>) =>
  Effect.gen(function*() {
    let answer: JwksAnswer = { _tag: "keys", keys: initial }
    let fetches = 0
    const waiting: Array<() => void> = []
    const { port } = yield* listen((_req, res) => {
      fetches++
      waiting.splice(0).forEach((resolve) => resolve())
      switch (answer._tag) {
        case "keys":
          res.setHeader("content-type", "application/json")
          res.end(JSON.stringify({ keys: answer.keys.map((key) => publicJwk(key.privateJwk)) }))
          return
        case "status":
          res.writeHead(answer.status).end("{}")
          return
        case "redirect":
          res.writeHead(302, { location: answer.location }).end()
          return
        case "hang":
          return
      }
    })
    return {
      // A distinct path per server keeps the process-wide JWKS cache entries of tests apart.
      url: `http://127.0.0.1:${port}/jwks-${crypto.randomUUID()}`,
      setKeys: (keys: ReadonlyArray<PublishedKey>) => void (answer = { _tag: "keys", keys }),
      answer: (next: JwksAnswer) => void (answer = next),
      fetches: () => fetches,
      /** Waits for the next request, counting from this call. */
      nextRequest: () => {
        const arrived = new Promise<void>((resolve) => waiting.push(resolve))
        return Effect.promise(() => arrived)
      }
    }
  })
