/**
 * JWKS and discovery fetching, cached per URL for the process. A token whose `kid` is unknown
 * triggers at most one refetch per cooldown (never 0: a storm of unknown kids must not become a
 * storm of fetches); concurrent refetches coalesce. Fetches go through the platform HttpClient with
 * a timeout; time is Effect `Clock` time, so `TestClock` drives the cooldown in tests.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import { Clock, Duration, Effect, Schema } from "effect"
import * as jose from "jose"

/** Fetching a key set or a discovery document failed. */
export class JwksUnavailable extends Schema.TaggedError<JwksUnavailable>()("JwksUnavailable", {
  url: Schema.String,
  message: Schema.String
}) {}

/** Cache tuning. */
export interface Options {
  /** Minimum time between two refetches of one URL (default 30 s; values under 1 s are raised to 1 s). */
  readonly cooldownMs?: number
  /** A key set older than this is refetched on next use (default 10 min). */
  readonly maxAgeMs?: number
  /** Fetch timeout (default 5 s). */
  readonly timeoutMs?: number
}

interface Entry {
  keys: ReturnType<typeof jose.createLocalJWKSet> | undefined
  fetchedAt: number
  /** Fetch count, for tests and metrics. */
  fetches: number
  readonly lock: Effect.Semaphore
}

const entries = new Map<string, Entry>()

const JwkSet = Schema.Struct({ keys: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown })) })

const fetchJson = <A, I>(url: string, schema: Schema.Schema<A, I>, timeoutMs: number) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.get(url, { accept: "application/json" }).pipe(Effect.timeout(Duration.millis(timeoutMs)))
    return yield* HttpClientResponse.schemaBodyJson(schema)(yield* HttpClientResponse.filterStatusOk(response))
  }).pipe(Effect.mapError((error) => new JwksUnavailable({ url, message: error.message })))

const entryOf = (url: string): Entry => {
  let entry = entries.get(url)
  if (entry === undefined) {
    entry = { keys: undefined, fetchedAt: Number.NEGATIVE_INFINITY, fetches: 0, lock: Effect.unsafeMakeSemaphore(1) }
    entries.set(url, entry)
  }
  return entry
}

/** Fetches `url` unless it was fetched within `minAgeMs`; concurrent callers share one fetch. */
const refresh = (url: string, entry: Entry, minAgeMs: number, timeoutMs: number) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    // The common case, a fresh key set, takes no lock.
    entry.keys !== undefined && now - entry.fetchedAt < minAgeMs ? Effect.void : refreshLocked(url, entry, minAgeMs, timeoutMs))

const refreshLocked = (url: string, entry: Entry, minAgeMs: number, timeoutMs: number) =>
  entry.lock.withPermits(1)(Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    if (entry.keys !== undefined && now - entry.fetchedAt < minAgeMs) return
    entry.fetches++
    entry.fetchedAt = now
    const set = yield* fetchJson(url, JwkSet, timeoutMs)
    entry.keys = jose.createLocalJWKSet(set as jose.JSONWebKeySet)
  }))

/**
 * The cached key set of `url` when it is fresh at `now` (the hot path: no lock, no effect), else
 * undefined and `verify` must be used.
 */
export const freshKeys = (url: string, now: number, options: Options = {}) => {
  const entry = entries.get(url)
  return entry?.keys !== undefined && now - entry.fetchedAt < (options.maxAgeMs ?? 600_000) ? entry.keys : undefined
}

/** The number of times `url` was fetched in this process. */
export const fetchCount = (url: string): number => entries.get(url)?.fetches ?? 0

/**
 * Verifies `token` with the key set at `url`: loads it on first use (or when stale), and on an
 * unknown `kid` refetches once if the cooldown allows, then tries again.
 */
export const verify = (
  token: string,
  url: string,
  verifyOptions: jose.JWTVerifyOptions,
  options: Options = {}
): Effect.Effect<jose.JWTPayload, JwksUnavailable | jose.errors.JOSEError, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const entry = entryOf(url)
    const cooldownMs = Math.max(1_000, options.cooldownMs ?? 30_000)
    const timeoutMs = options.timeoutMs ?? 5_000
    yield* refresh(url, entry, options.maxAgeMs ?? 600_000, timeoutMs)
    const attempt = Effect.tryPromise({
      try: () => jose.jwtVerify(token, entry.keys!, verifyOptions),
      catch: (error) => error instanceof jose.errors.JOSEError ? error : new jose.errors.JOSEError(String(error))
    })
    return yield* attempt.pipe(
      Effect.catchIf(
        (error) => error.code === "ERR_JWKS_NO_MATCHING_KEY",
        () => Effect.zipRight(refresh(url, entry, cooldownMs, timeoutMs), attempt)
      ),
      Effect.map((result) => result.payload)
    )
  })

const Discovery = Schema.Struct({ issuer: Schema.String, jwks_uri: Schema.String })
const discovered = new Map<string, string>()

const discoveryUrlOf = (issuer: string, discoveryUrl: string | undefined) =>
  discoveryUrl ?? `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`

/** The `jwks_uri` already discovered for `issuer`, if any (no fetch). */
export const discoveredJwksUri = (issuer: string, discoveryUrl?: string): string | undefined =>
  discovered.get(discoveryUrlOf(issuer, discoveryUrl))

/**
 * The `jwks_uri` of an OpenID provider, from `${issuer}/.well-known/openid-configuration` (or
 * `discoveryUrl`), fetched on first use and cached for the process lifetime.
 */
export const discoverJwksUri = (
  issuer: string,
  discoveryUrl?: string,
  options: Options = {}
): Effect.Effect<string, JwksUnavailable, HttpClient.HttpClient> =>
  Effect.suspend(() => {
    const url = discoveryUrlOf(issuer, discoveryUrl)
    const known = discovered.get(url)
    if (known !== undefined) return Effect.succeed(known)
    return fetchJson(url, Discovery, options.timeoutMs ?? 5_000).pipe(
      Effect.tap((document) => Effect.sync(() => discovered.set(url, document.jwks_uri))),
      Effect.map((document) => document.jwks_uri)
    )
  })
