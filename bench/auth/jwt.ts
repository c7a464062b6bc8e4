/**
 * JWT verifications per second with a warm JWKS cache, through a provider strategy
 * (`jwtBearerStrategy`: token from the header, cached key set, node:crypto verification, Subject mapping),
 * against jose's bare `jwtVerify` with the public key in hand and the same checks, for RS256 and
 * ES256, in the same run.
 *
 * A third side runs the same bare call inside Effect fibers, separating the runtime's share of the
 * overhead from the strategy's own. Every side runs 32 concurrent verification loops (as request
 * fibers of a loaded server would). Rounds rotate between the sides, so a noisy neighbour slows
 * them alike; the figures are medians of per-round ratios. CPU time per verification (user +
 * system, which includes the crypto thread pool) is printed too.
 */
import { FetchHttpClient, Headers } from "@effect/platform"
import { Effect } from "effect"
import * as jose from "jose"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { jwtBearerStrategy } from "../../src/auth/IdentityProviders.js"
import { perSecond, table } from "../support.js"

const CONCURRENCY = 32
const PER_ROUND = 3_200
const WARMUP_ROUNDS = 3
const ROUNDS = 15

interface Sample {
  readonly perSecond: number
  readonly cpuMicros: number
}

/** Runs `round` (PER_ROUND verifications) and measures it. */
const sample = async (round: () => Promise<void>): Promise<Sample> => {
  const cpu = process.cpuUsage()
  const start = performance.now()
  await round()
  const elapsed = performance.now() - start
  const used = process.cpuUsage(cpu)
  return { perSecond: PER_ROUND / (elapsed / 1000), cpuMicros: (used.user + used.system) / PER_ROUND }
}

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const measure = async (alg: "RS256" | "ES256") => {
  const { privateKey, publicKey } = await jose.generateKeyPair(alg, { extractable: true })
  const jwk = { ...(await jose.exportJWK(publicKey)), kid: "k1", alg, use: "sig" }
  const server = createServer((_req, res) => res.end(JSON.stringify({ keys: [jwk] })))
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const jwksUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`
  const token = await new jose.SignJWT({ sub: "user_1", org: "acme", scope: "notes:read" })
    .setProtectedHeader({ alg, kid: "k1", typ: "JWT" })
    .setIssuer("https://idp.test")
    .setAudience("api")
    .setExpirationTime("1h")
    .sign(privateKey)
  const strategy = jwtBearerStrategy({
    id: "bench",
    jwksUrl,
    issuer: "https://idp.test",
    audience: "api",
    tenantIdFromClaims: (claims) => typeof claims.org === "string" ? claims.org : null
  })
  const request = { headers: Headers.fromInput({ authorization: `Bearer ${token}` }) }
  const bareOptions: jose.JWTVerifyOptions = { issuer: "https://idp.test", audience: "api", algorithms: [alg], requiredClaims: ["exp"], clockTolerance: 5 }

  const loop = Effect.gen(function*() {
    for (let i = 0; i < PER_ROUND / CONCURRENCY; i++) {
      const verdict = yield* strategy.authenticate(request)
      if (verdict._tag !== "Authenticated") return yield* Effect.dieMessage(`expected a subject, got ${verdict._tag}`)
    }
  })
  const viaStrategy = () =>
    Effect.runPromise(
      Effect.all(Array.from({ length: CONCURRENCY }, () => loop), { concurrency: "unbounded", discard: true }).pipe(
        Effect.provide(FetchHttpClient.layer)
      )
    )
  // The same bare call inside Effect fibers: separates the runtime's share from the strategy's.
  const inFiberLoop = Effect.gen(function*() {
    for (let i = 0; i < PER_ROUND / CONCURRENCY; i++) {
      const { payload } = yield* Effect.promise(() => jose.jwtVerify(token, publicKey, bareOptions))
      if (payload.sub !== "user_1") return yield* Effect.dieMessage("expected the subject")
    }
  })
  const inFibers = () =>
    Effect.runPromise(Effect.all(Array.from({ length: CONCURRENCY }, () => inFiberLoop), { concurrency: "unbounded", discard: true }))
  const bare = async () => {
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      for (let i = 0; i < PER_ROUND / CONCURRENCY; i++) {
        const { payload } = await jose.jwtVerify(token, publicKey, bareOptions)
        if (payload.sub !== "user_1") throw new Error("expected the subject")
      }
    }))
  }

  // Warm the key set (the first call fetches it) and every path's JIT.
  for (let i = 0; i < WARMUP_ROUNDS; i++) {
    await viaStrategy()
    await inFibers()
    await bare()
  }
  const peer: Array<Sample> = []
  const fiber: Array<Sample> = []
  const fw: Array<Sample> = []
  for (let round = 0; round < ROUNDS; round++) {
    // Rotate which side goes first, so none always runs right after another's garbage.
    const sides: ReadonlyArray<readonly [Array<Sample>, () => Promise<void>]> = [[peer, bare], [fiber, inFibers], [fw, viaStrategy]]
    for (let i = 0; i < sides.length; i++) {
      const [samples, side] = sides[(round + i) % sides.length]!
      samples.push(await sample(side))
    }
  }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  const ratio = (a: Array<Sample>, b: Array<Sample>) => median(a.map((sample, i) => sample.perSecond / b[i]!.perSecond))
  const cpuRatio = median(fw.map((sample, i) => sample.cpuMicros / peer[i]!.cpuMicros))
  const overhead = (r: number) => Number(((1 / r - 1) * 100).toFixed(1))
  return {
    alg,
    "jose/s": perSecond(median(peer.map((s) => s.perSecond))),
    "jose in fibers/s": perSecond(median(fiber.map((s) => s.perSecond))),
    "strategy/s": perSecond(median(fw.map((s) => s.perSecond))),
    "strategy / jose": Number(ratio(fw, peer).toFixed(3)),
    "overhead % vs jose": overhead(ratio(fw, peer)),
    "overhead % vs jose in fibers": overhead(ratio(fw, fiber)),
    "jose CPU µs/op": Number(median(peer.map((s) => s.cpuMicros)).toFixed(1)),
    "strategy CPU µs/op": Number(median(fw.map((s) => s.cpuMicros)).toFixed(1)),
    "CPU overhead %": Number(((cpuRatio - 1) * 100).toFixed(1))
  }
}

/** Runs the benchmark and prints its table. */
export const run = async () => {
  table(
    `JWT verification with a warm JWKS cache (${PER_ROUND} per round over ${CONCURRENCY} concurrent loops, medians of ${ROUNDS} alternating rounds)`,
    [await measure("RS256"), await measure("ES256")]
  )
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
