/**
 * The JWKS verification strategy every identity provider builds on (spec 5.1): take the token from
 * `Authorization: Bearer` or the strategy's cookie, verify its signature against the provider's
 * cached JWKS with `jose`, check issuer, audience and times, map the claims to a Subject with a
 * tenant, and keep the raw claims under `metadata.claims`.
 *
 * Fixed rules (DESIGN, "JWT"): an explicit allow-list of asymmetric algorithms (HS* never reach
 * this path; `SharedSecretStrategy` is the separate symmetric verifier), `exp` required, tokens
 * over 16 KiB refused before any parsing, 5 s default clock tolerance. Token times are checked
 * against Effect `Clock` time.
 */
import type { HttpClient } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import * as jose from "jose"
import * as Subject from "../kernel/Subject.js"
import * as AuthStrategy from "./AuthStrategy.js"
import * as Claims from "./Claims.js"
import * as Discovery from "./Discovery.js"
import * as Jwks from "./Jwks.js"

/** Asymmetric algorithms accepted on the JWKS path. */
export type Algorithm = "RS256" | "ES256" | "PS256" | "EdDSA"

/** Every algorithm the JWKS path can be configured with. */
export const asymmetricAlgorithms: ReadonlyArray<Algorithm> = ["RS256", "ES256", "PS256", "EdDSA"]

/** The allow-list when a strategy names none. */
export const defaultAlgorithms: ReadonlyArray<Algorithm> = ["RS256", "ES256"]

/** Tokens longer than this are refused before any decoding. */
export const maxTokenBytes = 16 * 1024

/** Default tolerance on `exp` and `nbf`, in seconds. */
export const defaultClockToleranceSeconds = 5

/** A strategy configuration refused at construction (thrown: it is a programming error). */
export class StrategyConfigInvalid extends Schema.TaggedError<StrategyConfigInvalid>()("StrategyConfigInvalid", {
  strategy: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `auth strategy "${this.strategy}": ${this.reason}`
  }
}

/** Where a strategy's keys come from. */
export type KeySource =
  | { readonly jwksUrl: string }
  | { readonly discover: { readonly issuer: string; readonly discoveryUrl?: string } }

/** How verified claims become a verdict. */
export interface Mapping {
  /** Strategy id, carried as `metadata.provider`. */
  readonly id: string
  /** The tenant of verified claims; null fails the verdict unless `defaultTenantId` is set. */
  readonly tenantFromClaims: (claims: Claims.Claims) => string | null
  readonly defaultTenantId?: string
  /** A further check on verified claims: a refusal reason, or null to accept. */
  readonly check?: (claims: Claims.Claims) => string | null
}

/** Options of `make`. */
export interface Options extends Mapping {
  readonly keys: KeySource
  readonly issuer: string | ReadonlyArray<string>
  /** Omit (or null) for providers whose tokens carry no `aud`. */
  readonly audience?: string | ReadonlyArray<string> | null
  /** Cookie holding the token; null means the Authorization header only. */
  readonly cookieName: string | null
  /** The allow-list (default RS256 and ES256). */
  readonly algorithms?: ReadonlyArray<Algorithm>
  /** Seconds of clock skew tolerated on `exp` and `nbf` (default 5). */
  readonly clockToleranceSeconds?: number
  readonly jwks?: Jwks.Options
}

/** The token of a request: the bearer header first, then the cookie (unless header-only). */
export const tokenOf = (headers: AuthStrategy.AuthRequest["headers"], cookieName: string | null): string | undefined => {
  const bearer = AuthStrategy.readBearer(headers)
  if (bearer !== undefined || cookieName === null) return bearer
  const cookie = AuthStrategy.readCookie(headers, cookieName)
  return cookie === undefined || cookie.length === 0 ? undefined : cookie
}

// Constructors looked up once (each lookup on the tagged enum builds one).
const authenticated = AuthStrategy.Verdict.Authenticated
const failed = AuthStrategy.Verdict.Failed

/** Maps verified claims to a verdict: a subject needs a `sub` and a tenant. */
export const verdictOf = (mapping: Mapping, claims: Claims.Claims): AuthStrategy.Verdict => {
  if (typeof claims.sub !== "string" || claims.sub.length === 0) {
    return failed({ reason: "the token has no subject" })
  }
  const refused = mapping.check?.(claims) ?? null
  if (refused !== null) return failed({ reason: refused })
  const tenantId = mapping.tenantFromClaims(claims) ?? mapping.defaultTenantId ?? null
  if (tenantId === null) return failed({ reason: "the token names no tenant" })
  return authenticated({
    subject: Subject.make({
      type: "user",
      id: claims.sub,
      tenantId,
      scopes: Claims.scopes(claims),
      metadata: { provider: mapping.id, claims }
    })
  })
}

/** A verification failure as a verdict reason: jose's error code (and the claim), never token content. */
export const failedVerdict = (error: unknown): AuthStrategy.Verdict => {
  if (!(error instanceof jose.errors.JOSEError)) return failed({ reason: "invalid token" })
  const claim = error instanceof jose.errors.JWTClaimValidationFailed || error instanceof jose.errors.JWTExpired
    ? ` (${error.claim})`
    : ""
  return failed({ reason: `invalid token: ${error.code}${claim}` })
}

const noMatch = Effect.succeed(AuthStrategy.Verdict.NoMatch())
const tooLarge = Effect.succeed(AuthStrategy.Verdict.Failed({ reason: `the token is larger than ${maxTokenBytes} bytes` }))

/** Refuses anything but the asymmetric allow-list (HS*, `none`, unknown names). */
export const checkedAlgorithms = (id: string, algorithms: ReadonlyArray<string>): Array<Algorithm> => {
  const refused = algorithms.filter((alg) => !(asymmetricAlgorithms as ReadonlyArray<string>).includes(alg))
  if (refused.length > 0) {
    throw new StrategyConfigInvalid({ strategy: id, reason: `only ${asymmetricAlgorithms.join(", ")} are accepted on the JWKS path, not ${refused.join(", ")}` })
  }
  if (algorithms.length === 0) throw new StrategyConfigInvalid({ strategy: id, reason: "the algorithm allow-list is empty" })
  return [...algorithms] as Array<Algorithm>
}

/** Host names a key source contacts (for discovery, the document's host; see `oidcStrategy`). */
export const hostsOf = (keys: KeySource): ReadonlyArray<string> => {
  const url = "jwksUrl" in keys ? keys.jwksUrl : Discovery.documentUrl(keys.discover.issuer, keys.discover.discoveryUrl)
  return URL.canParse(url) ? [new URL(url).host] : []
}

const isUnknownKid = (error: unknown) => error instanceof jose.errors.JWKSNoMatchingKey

/** Builds a JWKS-verifying strategy. Throws `StrategyConfigInvalid` for a refused configuration. */
export const make = (options: Options): AuthStrategy.AuthStrategy => {
  const jwks = Jwks.resolve(options.jwks)
  const keys = options.keys
  const algorithms = checkedAlgorithms(options.id, options.algorithms ?? defaultAlgorithms)
  const base: jose.JWTVerifyOptions = {
    algorithms,
    issuer: typeof options.issuer === "string" ? options.issuer : [...options.issuer],
    ...(options.audience === undefined || options.audience === null
      ? {}
      : { audience: typeof options.audience === "string" ? options.audience : [...options.audience] }),
    requiredClaims: ["exp"],
    clockTolerance: options.clockToleranceSeconds ?? defaultClockToleranceSeconds
  }
  const knownUrl = "jwksUrl" in keys
    ? () => keys.jwksUrl
    : () => Discovery.cachedJwksUri(keys.discover.issuer, keys.discover.discoveryUrl)
  const locate: Effect.Effect<string, Discovery.DiscoveryUnavailable, HttpClient.HttpClient> = "jwksUrl" in keys
    ? Effect.succeed(keys.jwksUrl)
    : Discovery.jwksUri(keys.discover.issuer, {
      ...(keys.discover.discoveryUrl === undefined ? {} : { discoveryUrl: keys.discover.discoveryUrl }),
      timeoutMs: jwks.timeoutMs
    })
  // jose compares times in whole seconds, so one options object serves a whole second.
  let optionsSecond = Number.NaN
  let optionsOfSecond = base
  const optionsAt = (now: number) => {
    const second = Math.floor(now / 1000)
    if (second !== optionsSecond) {
      optionsOfSecond = { ...base, currentDate: new Date(second * 1000) }
      optionsSecond = second
    }
    return optionsOfSecond
  }
  // The key set's remembered key for this token's exact header when there is one (no key search,
  // no resolver round trip), else jose's selection; a successful selection is remembered.
  const verify = (token: string, keySet: Jwks.KeySet, now: number) => {
    const options = optionsAt(now)
    const header = token.slice(0, token.indexOf("."))
    const known = keySet.keyForHeader(header)
    if (known !== undefined) return jose.jwtVerify(token, known, options)
    return jose.jwtVerify(token, keySet.resolve, options).then((result) => {
      if (result.key instanceof CryptoKey) keySet.remember(header, result.key)
      return result
    })
  }
  const attempt = (token: string, keySet: Jwks.KeySet, now: number) =>
    Effect.promise(() => verify(token, keySet, now).then((result) => Either.right(result.payload), (error: unknown) => Either.left(error)))

  // Before any fetch, refuse what no key could verify (as jose would, with its codes), so
  // garbage tokens cannot make the strategy contact the provider.
  const refusedHeader = (token: string): AuthStrategy.Verdict | undefined => {
    let alg: unknown
    try {
      alg = jose.decodeProtectedHeader(token).alg
    } catch {
      return AuthStrategy.Verdict.Failed({ reason: "invalid token: ERR_JWS_INVALID" })
    }
    return typeof alg === "string" && (algorithms as ReadonlyArray<string>).includes(alg)
      ? undefined
      : AuthStrategy.Verdict.Failed({ reason: "invalid token: ERR_JOSE_ALG_NOT_ALLOWED" })
  }

  // Locate and load the keys, verify, and on an unknown kid refetch once (cooldown permitting).
  const slowPath = (token: string, now: number) =>
    Effect.gen(function*() {
      const refused = refusedHeader(token)
      if (refused !== undefined) return refused
      const url = yield* locate
      const keySet = yield* Jwks.keySet(url, jwks)
      const first = yield* attempt(token, keySet, now)
      if (Either.isRight(first)) return verdictOf(options, first.right)
      if (!isUnknownKid(first.left)) return failedVerdict(first.left)
      const newer = yield* Jwks.keySetAfterUnknownKid(url, keySet, jwks)
      if (newer === undefined) return failedVerdict(first.left)
      const second = yield* attempt(token, newer, now)
      return Either.isRight(second) ? verdictOf(options, second.right) : failedVerdict(second.left)
    }).pipe(Effect.catchAll((error) => Effect.succeed(AuthStrategy.Verdict.Failed({ reason: error.message }))))

  return {
    id: options.id,
    outboundHosts: hostsOf(keys),
    authenticate: ({ headers }) => {
      const token = tokenOf(headers, options.cookieName)
      if (token === undefined) return noMatch
      if (token.length > maxTokenBytes) return tooLarge
      return Effect.clockWith((clock) => {
        const now = clock.unsafeCurrentTimeMillis()
        const url = knownUrl()
        const keySet = url === undefined ? undefined : Jwks.freshKeySet(url, now, jwks)
        if (keySet === undefined) return slowPath(token, now)
        // Hot path: a warm key set and a known kid cost one jose call and no fetch logic.
        return Effect.async<AuthStrategy.Verdict, never, HttpClient.HttpClient>((resume) => {
          verify(token, keySet, now).then(
            (result) => resume(Effect.succeed(verdictOf(options, result.payload))),
            (error: unknown) => resume(isUnknownKid(error) ? slowPath(token, now) : Effect.succeed(failedVerdict(error)))
          )
        })
      })
    }
  }
}
