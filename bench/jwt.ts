/**
 * JWT verifications per second with a warm JWKS cache, through the provider strategy, against
 * jose's bare `jwtVerify` with the key in hand, for RS256 and ES256, in the same run.
 */
import { FetchHttpClient, Headers } from "@effect/platform"
import { Effect } from "effect"
import * as jose from "jose"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { jwtBearerStrategy } from "../src/auth/IdentityProviders.js"
import { perSecond, table } from "./support.js"

const ROUNDS = 5
const N = 6_400
const WORKERS = 32

const measure = async (alg: "RS256" | "ES256") => {
  const { privateKey, publicKey } = await jose.generateKeyPair(alg, { extractable: true })
  const jwk = { ...(await jose.exportJWK(publicKey)), kid: "k", alg, use: "sig" }
  const server = createServer((_req, res) => res.end(JSON.stringify({ keys: [jwk] })))
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const jwksUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`
  const token = await new jose.SignJWT({ sub: "u", org: "t" }).setProtectedHeader({ alg, kid: "k" })
    .setIssuer("https://idp.test").setAudience("api").setExpirationTime("1h").sign(privateKey)
  const strategy = jwtBearerStrategy({ id: "bench", jwksUrl, issuer: "https://idp.test", audience: "api", tenantIdFromClaims: (c) => (c.org as string) ?? null })
  const request = { headers: Headers.fromInput({ authorization: `Bearer ${token}` }) }
  const viaStrategy = () =>
    Effect.runPromise(Effect.gen(function*() {
      const start = performance.now()
      yield* Effect.all(Array.from({ length: WORKERS }, () => worker), { concurrency: "unbounded", discard: true })
      return N / ((performance.now() - start) / 1000)
    }).pipe(Effect.provide(FetchHttpClient.layer)))
  // Both sides run WORKERS concurrent loops (as request fibers of a server under load would),
  // each verifying N / WORKERS tokens in turn.
  const bare = async () => {
    const start = performance.now()
    await Promise.all(Array.from({ length: WORKERS }, async () => {
      for (let i = 0; i < N / WORKERS; i++) {
        await jose.jwtVerify(token, publicKey, { issuer: "https://idp.test", audience: "api", algorithms: [alg] })
      }
    }))
    return N / ((performance.now() - start) / 1000)
  }
  const worker = Effect.gen(function*() {
    for (let i = 0; i < N / WORKERS; i++) {
      const verdict = yield* strategy.authenticate(request)
      if (verdict._tag !== "Authenticated") return yield* Effect.dieMessage("expected a subject")
    }
  })
  // Warm the JWKS cache and the JIT of both paths before measuring.
  for (let i = 0; i < 3; i++) {
    await viaStrategy()
    await bare()
  }
  const fw: Array<number> = []
  const peer: Array<number> = []
  for (let round = 0; round < ROUNDS; round++) {
    peer.push(await bare())
    fw.push(await viaStrategy())
  }
  server.close()
  const median = (values: Array<number>) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  const ratio = median(fw.map((v, i) => v / peer[i]!))
  return { alg, "jose jwtVerify/s": perSecond(median(peer)), "strategy/s": perSecond(median(fw)), "strategy / jose": Number(ratio.toFixed(2)), "overhead %": Number(((1 / ratio - 1) * 100).toFixed(1)) }
}

export const run = async () => {
  table(`JWT verification with a warm JWKS cache (${N} per round over ${WORKERS} concurrent loops, medians of ${ROUNDS})`, [await measure("RS256"), await measure("ES256")])
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
