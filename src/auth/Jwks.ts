/**
 * The JWKS cache: one key set per JWKS URL, shared by every strategy in the process that names the
 * URL (module-level, not a service: `AuthStrategy.authenticate` may only require an HttpClient, and
 * two strategies over one provider should share one fetch and one cooldown).
 *
 * Rules:
 * - the first use fetches the set; a set older than `maxAgeMs` (default 10 min) is refetched on
 *   next use, and if that refetch fails the old keys keep serving (a provider outage does not log
 *   everybody out; a revoked key is dropped by the next successful fetch);
 * - a token with an unknown `kid` triggers at most one refetch per `cooldownMs` (default 30 s,
 *   never under 1 s: a storm of unknown kids must not become a storm of fetches);
 * - concurrent callers share one fetch; a URL that fails is asked again at most once a second;
 * - fetches go through the platform HttpClient with a timeout (default 5 s), refuse redirects and
 *   non-2xx answers, and decode the body with a Schema.
 *
 * Time is Effect `Clock` time, so `TestClock` drives the cooldown and the maximum age in tests.
 * Tests isolate themselves by using a distinct URL per key set.
 */
import { FetchHttpClient, HttpClient, HttpClientResponse } from "@effect/platform"
import { Clock, Duration, Effect, Option, Schema } from "effect"
import { createPublicKey, type JsonWebKey, type KeyObject } from "node:crypto"
import { JwksUnavailable } from "./Errors.js"
import * as Settings from "../app/Settings.js"

/** Cache tuning, per strategy. */
export interface Options {
  /** Minimum time between two refetches caused by unknown kids (default 30 s; raised to at least 1 s). */
  readonly cooldownMs?: number
  /** A key set older than this is refetched on next use (default 10 min). */
  readonly maxAgeMs?: number
  /** Fetch timeout (default 5 s). */
  readonly timeoutMs?: number
}

/** Options with their defaults applied. */
export interface Resolved {
  readonly cooldownMs: number
  readonly maxAgeMs: number
  readonly timeoutMs: number
}

/** The smallest cooldown accepted (DESIGN: never 0), also the retry delay after a failed fetch. */
export const minimumCooldownMs = 1_000

/** Applies the defaults and the cooldown floor. */
export const resolve = (options: Options = {}): Resolved => {
  // 0 is accepted for the cooldown and age, and raised to the floor below (never 0 in effect).
  Settings.checkNonNegativeInteger("jwks.cooldownMs", options.cooldownMs)
  Settings.checkNonNegativeInteger("jwks.maxAgeMs", options.maxAgeMs)
  Settings.checkPositiveInteger("jwks.timeoutMs", options.timeoutMs)
  return resolved(options)
}

const resolved = (options: Options): Resolved => ({
  cooldownMs: Math.max(minimumCooldownMs, options.cooldownMs ?? 30_000),
  maxAgeMs: Math.max(minimumCooldownMs, options.maxAgeMs ?? 600_000),
  timeoutMs: options.timeoutMs ?? 5_000
})

/** A published key the JWKS path can verify with, imported once when its set is fetched. */
export interface Key {
  readonly kid: string | undefined
  /** The algorithms it may verify (from its material, narrowed by the JWK's `alg`, `use` and `key_ops`). */
  readonly algorithms: ReadonlyArray<string>
  readonly key: KeyObject
  /** The length of its signatures: the modulus for RSA, 64 for P-256 (IEEE P1363) and Ed25519. */
  readonly signatureBytes: number
}

/** A fetched key set: its usable keys (compared by identity to tell a refetched set apart). */
export interface KeySet {
  readonly keys: ReadonlyArray<Key>
}

// The algorithms a key's material allows: RSA of 2048 bits or more (as jose requires), P-256, Ed25519.
const algorithmsOf = (key: KeyObject): ReadonlyArray<string> => {
  const details = key.asymmetricKeyDetails
  switch (key.asymmetricKeyType) {
    case "rsa":
      return (details?.modulusLength ?? 0) >= 2048 ? ["RS256", "PS256"] : []
    case "ec":
      return details?.namedCurve === "prime256v1" ? ["ES256"] : []
    case "ed25519":
      return ["EdDSA"]
    default:
      return []
  }
}

/**
 * A JWK as a verification key, or undefined when nothing could use it: jose's rules (`use` must be
 * "sig", `key_ops` must allow "verify", `alg` pins one algorithm), private keys refused, and a key
 * Node cannot import is left out rather than failing the whole set.
 */
const keyOf = (jwk: Readonly<Record<string, unknown>>): Key | undefined => {
  const { alg, d, key_ops, kid, use } = jwk
  if (d !== undefined || (use !== undefined && use !== "sig")) return undefined
  if (key_ops !== undefined && !(Array.isArray(key_ops) && key_ops.includes("verify"))) return undefined
  if (kid !== undefined && typeof kid !== "string") return undefined
  let key: KeyObject
  try {
    key = createPublicKey({ key: jwk as JsonWebKey, format: "jwk" })
  } catch {
    return undefined
  }
  const algorithms = algorithmsOf(key).filter((candidate) => alg === undefined || alg === candidate)
  const signatureBytes = key.asymmetricKeyType === "rsa" ? Math.ceil((key.asymmetricKeyDetails?.modulusLength ?? 0) / 8) : 64
  return algorithms.length === 0 ? undefined : { kid, algorithms, key, signatureBytes }
}

const keySetOf = (jwks: ReadonlyArray<Readonly<Record<string, unknown>>>): KeySet => ({
  keys: jwks.flatMap((jwk) => keyOf(jwk) ?? [])
})

/** The keys of `keySet` that may verify a token with this `alg` and `kid` (any kid when it has none). */
export const candidates = (keySet: KeySet, alg: string, kid: string | undefined): ReadonlyArray<Key> =>
  keySet.keys.filter((key) => (kid === undefined || key.kid === kid) && key.algorithms.includes(alg))

interface Entry {
  keySet: KeySet | undefined
  /** Clock time of the last successful fetch. */
  fetchedAt: number
  /** Clock time of the last attempt, successful or not. */
  attemptedAt: number
  lastFailure: JwksUnavailable | undefined
  fetches: number
  readonly lock: Effect.Semaphore
}

const entries = new Map<string, Entry>()

const entryOf = (url: string): Entry => {
  let entry = entries.get(url)
  if (entry === undefined) {
    entry = {
      keySet: undefined,
      fetchedAt: Number.NEGATIVE_INFINITY,
      attemptedAt: Number.NEGATIVE_INFINITY,
      lastFailure: undefined,
      fetches: 0,
      lock: Effect.unsafeMakeSemaphore(1)
    }
    entries.set(url, entry)
  }
  return entry
}

/**
 * GETs `url` and decodes its JSON body with `schema`: timeout, no redirects (the configured URL is
 * the final one), 2xx only. Shared with OIDC discovery.
 */
export const fetchJson = <A, I>(
  url: string,
  schema: Schema.Schema<A, I>,
  timeoutMs: number
): Effect.Effect<A, JwksUnavailable, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    // Keep whatever fetch options the app configured, but never follow a redirect.
    const init = Option.getOrElse(yield* Effect.serviceOption(FetchHttpClient.RequestInit), () => ({}))
    const response = yield* client.get(url, { accept: "application/json" }).pipe(
      Effect.provideService(FetchHttpClient.RequestInit, { ...init, redirect: "manual" }),
      Effect.mapError((error) => new JwksUnavailable({ url, reason: error._tag }))
    )
    if (response.status < 200 || response.status >= 300) {
      return yield* new JwksUnavailable({ url, reason: `status ${response.status}` })
    }
    return yield* HttpClientResponse.schemaBodyJson(schema)(response).pipe(
      Effect.mapError(() => new JwksUnavailable({ url, reason: "unexpected body" }))
    )
  }).pipe(
    Effect.timeoutFail({
      duration: Duration.millis(timeoutMs),
      onTimeout: () => new JwksUnavailable({ url, reason: `no answer within ${timeoutMs} ms` })
    })
  )

const JwkSet = Schema.Struct({
  keys: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})

/** Fetches under the entry's lock when `due` still holds once the lock is held (concurrent callers share one fetch). */
const fetchIfDue = (url: string, entry: Entry, options: Resolved, due: (now: number) => boolean) =>
  entry.lock.withPermits(1)(Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    if (!due(now)) return
    entry.attemptedAt = now
    entry.fetches++
    const set = yield* Effect.either(fetchJson(url, JwkSet, options.timeoutMs))
    if (set._tag === "Left") {
      entry.lastFailure = set.left
      return
    }
    entry.keySet = keySetOf(set.right.keys)
    entry.fetchedAt = now
    entry.lastFailure = undefined
  }))

/** The cached key set of `url` when it is fresh at `now`: the hot path, with no lock and no effect. */
export const freshKeySet = (url: string, now: number, options: Resolved): KeySet | undefined => {
  const entry = entries.get(url)
  return entry?.keySet !== undefined && now - entry.fetchedAt < options.maxAgeMs ? entry.keySet : undefined
}

/** The key set of `url`: loaded on first use, refreshed when older than `maxAgeMs` (stale keys serve if that fails). */
export const keySet = (url: string, options: Resolved): Effect.Effect<KeySet, JwksUnavailable, HttpClient.HttpClient> =>
  Effect.suspend(() => {
    const entry = entryOf(url)
    const due = (now: number) =>
      (entry.keySet === undefined || now - entry.fetchedAt >= options.maxAgeMs) && now - entry.attemptedAt >= minimumCooldownMs
    const loaded = Effect.suspend(() =>
      entry.keySet !== undefined
        ? Effect.succeed(entry.keySet)
        : Effect.fail(entry.lastFailure ?? new JwksUnavailable({ url, reason: "not loaded" }))
    )
    return Effect.flatMap(Clock.currentTimeMillis, (now) =>
      // Stale keys with nothing to fetch yet serve at once, without queueing behind a fetch in flight.
      entry.keySet !== undefined && !due(now) ? Effect.succeed(entry.keySet) : Effect.zipRight(fetchIfDue(url, entry, options, due), loaded))
  })

/**
 * Called after `used` found no key for a token's kid: refetches unless another fiber already did
 * or the cooldown forbids it. Returns the newer key set, or undefined when nothing changed.
 */
export const keySetAfterUnknownKid = (
  url: string,
  used: KeySet,
  options: Resolved
): Effect.Effect<KeySet | undefined, never, HttpClient.HttpClient> =>
  Effect.suspend(() => {
    const entry = entryOf(url)
    return fetchIfDue(url, entry, options, (now) => entry.keySet === used && now - entry.attemptedAt >= options.cooldownMs).pipe(
      Effect.map(() => entry.keySet !== used ? entry.keySet : undefined)
    )
  })

/** How many times `url` was fetched by this process (tests and metrics). */
export const fetchCount = (url: string): number => entries.get(url)?.fetches ?? 0

export { JwksUnavailable } from "./Errors.js"
