/**
 * The JWKS verification strategy every identity provider builds on (spec 5.1): take the token from
 * `Authorization: Bearer` or the strategy's cookie, verify its signature against the provider's
 * cached JWKS with `node:crypto`, check issuer, audience and times, map the claims to a Subject
 * with a tenant, and keep the raw claims under `metadata.claims`. The checks are jose's, done here
 * because jose's WebCrypto promise chain, run from fibers, cost about a third of the throughput;
 * refusal reasons keep jose's error codes.
 *
 * Fixed rules (DESIGN, "JWT"): an explicit allow-list of asymmetric algorithms (HS* never reach
 * this path; `SharedSecretStrategy` is the separate symmetric verifier), `exp` required, tokens
 * over 16 KiB refused before any parsing, 5 s default clock tolerance. Token times are checked
 * against Effect `Clock` time.
 */
import type { HttpClient } from "@effect/platform"
import { Effect } from "effect"
import * as jose from "jose"
import { constants, type KeyObject, verify, type VerifyKeyObjectInput } from "node:crypto"
import * as LogText from "../kernel/LogText.js"
import * as Subject from "../kernel/Subject.js"
import * as AuthStrategy from "../app/AuthStrategy.js"
import * as Claims from "./Claims.js"
import * as Discovery from "./Discovery.js"
import * as Jwks from "./Jwks.js"
import { StrategyConfigInvalid } from "./Errors.js"

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

/**
 * The security schemes of a JWT strategy: the bearer token, and the cookie when it reads one too
 * (`<id>-cookie`).
 */
export const securitySchemesOf = (id: string, cookieName: string | null): Readonly<Record<string, AuthStrategy.SecurityScheme>> => ({
  [id]: { type: "http", scheme: "bearer", bearerFormat: "JWT", description: `A JWT accepted by the \`${id}\` strategy, as \`Authorization: Bearer <token>\`.` },
  ...(cookieName === null ? {} : {
    [`${id}-cookie`]: { type: "apiKey", in: "cookie", name: cookieName, description: `The same JWT as the \`${cookieName}\` cookie.` }
  })
})

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

/** A jose verification failure as a verdict reason (its error code and the claim), never token content. */
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

// Strict base64url (RFC 7515 §2): the alphabet only, no padding, and the canonical encoding (Buffer's
// decoder skips what it does not understand, so two token texts could otherwise carry one value).
const base64url = /^[A-Za-z0-9_-]*$/
const decodeBase64url = (text: string): Buffer | undefined => {
  if (!base64url.test(text)) return undefined
  const bytes = Buffer.from(text, "base64url")
  return bytes.toString("base64url") === text ? bytes : undefined
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** A JSON object in strict UTF-8, or undefined. */
const jsonObject = (bytes: Buffer): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(utf8.decode(bytes))
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined
  } catch {
    return undefined
  }
}

/** A compact JWS whose header passed the fixed rules; its signature is not checked yet. */
interface Token {
  readonly alg: Algorithm
  readonly kid: string | undefined
  /** The signed bytes: the encoded header and payload (ASCII, checked by the decoding). */
  readonly signingInput: Buffer
  readonly payload: Buffer
  readonly signature: Buffer
}

/**
 * Splits and decodes a compact JWS, or names why not (jose's error codes, so reasons read as they
 * did). Only `alg` and `kid` are read from the header: a key embedded or linked by the token (`jwk`,
 * `jku`, `x5u`, `x5c`) is never used, extensions (`crit`) are not understood, and an unencoded
 * payload (`b64: false`, RFC 7797) is no JWT.
 */
const parse = (token: string, algorithms: ReadonlyArray<Algorithm>): Token | string => {
  const first = token.indexOf(".")
  const second = token.indexOf(".", first + 1)
  if (first < 0 || second < 0 || token.includes(".", second + 1)) return "ERR_JWS_INVALID"
  const headerBytes = decodeBase64url(token.slice(0, first))
  const header = headerBytes === undefined ? undefined : jsonObject(headerBytes)
  const payload = decodeBase64url(token.slice(first + 1, second))
  const signature = decodeBase64url(token.slice(second + 1))
  if (header === undefined || payload === undefined || signature === undefined) return "ERR_JWS_INVALID"
  const { alg, kid } = header
  if (typeof alg !== "string" || (kid !== undefined && typeof kid !== "string")) return "ERR_JWS_INVALID"
  if (!isAllowed(algorithms, alg)) return "ERR_JOSE_ALG_NOT_ALLOWED"
  if (header.crit !== undefined) return "ERR_JOSE_NOT_SUPPORTED"
  if (header.b64 === false) return "ERR_JWT_INVALID"
  return { alg, kid, signingInput: Buffer.from(token.slice(0, second), "latin1"), payload, signature }
}

const isAllowed = (algorithms: ReadonlyArray<Algorithm>, alg: string): alg is Algorithm =>
  (algorithms as ReadonlyArray<string>).includes(alg)

// What `crypto.verify` needs per algorithm (`Jwks` only offers a key for the algorithms its type fits).
const digestOf = (alg: Algorithm) => alg === "EdDSA" ? null : "sha256"
const verifyKey = (alg: Algorithm, key: KeyObject): KeyObject | VerifyKeyObjectInput => {
  switch (alg) {
    case "RS256":
    case "EdDSA":
      return key
    case "PS256":
      return { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }
    case "ES256":
      return { key, dsaEncoding: "ieee-p1363" }
  }
}

const refused = (code: string) => failed({ reason: `invalid token: ${code}` })
const claimRefused = (claim: string) => refused(`ERR_JWT_CLAIM_VALIDATION_FAILED (${claim})`)

/** Builds a JWKS-verifying strategy. Throws `StrategyConfigInvalid` for a refused configuration. */
export const make = (options: Options): AuthStrategy.AuthStrategy => {
  const jwks = Jwks.resolve(options.jwks)
  const keys = options.keys
  const algorithms = checkedAlgorithms(options.id, options.algorithms ?? defaultAlgorithms)
  const issuers: ReadonlyArray<string> = typeof options.issuer === "string" ? [options.issuer] : options.issuer
  const audiences: ReadonlyArray<string> | undefined = options.audience === undefined || options.audience === null
    ? undefined
    : typeof options.audience === "string" ? [options.audience] : options.audience
  const tolerance = options.clockToleranceSeconds ?? defaultClockToleranceSeconds
  // A NaN or a string here would silently switch the time checks off: refuse it at construction.
  if (typeof tolerance !== "number" || !Number.isFinite(tolerance) || tolerance < 0) {
    throw new StrategyConfigInvalid({ strategy: options.id, reason: "clockToleranceSeconds must be a finite number ≥ 0" })
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

  // The claims of a verified payload, checked in jose's order with jose's codes: presence, issuer,
  // audience, then times in whole seconds of Clock time.
  const verdictOfPayload = (payload: Buffer, now: number): AuthStrategy.Verdict => {
    const claims = jsonObject(payload)
    if (claims === undefined) return refused("ERR_JWT_INVALID")
    if (!Object.hasOwn(claims, "iss")) return claimRefused("iss")
    if (audiences !== undefined && !Object.hasOwn(claims, "aud")) return claimRefused("aud")
    if (!Object.hasOwn(claims, "exp")) return claimRefused("exp")
    const { aud, exp, iat, iss, nbf } = claims
    if (typeof iss !== "string" || !issuers.includes(iss)) return claimRefused("iss")
    if (
      audiences !== undefined &&
      !(typeof aud === "string" ? audiences.includes(aud) : Array.isArray(aud) && audiences.some((a) => aud.includes(a)))
    ) return claimRefused("aud")
    if (iat !== undefined && !Number.isFinite(iat)) return claimRefused("iat")
    const seconds = Math.floor(now / 1000)
    if (nbf !== undefined && !(typeof nbf === "number" && nbf <= seconds + tolerance)) return claimRefused("nbf")
    if (typeof exp !== "number" || !Number.isFinite(exp)) return claimRefused("exp")
    if (exp <= seconds - tolerance) return refused("ERR_JWT_EXPIRED (exp)")
    return verdictOf(options, claims)
  }

  // One candidate key verifies (on the crypto thread pool, as WebCrypto would); none or several refuse, as in jose.
  const verified = (token: Token, found: ReadonlyArray<Jwks.Key>, now: number): Effect.Effect<AuthStrategy.Verdict> => {
    if (found.length !== 1) return Effect.succeed(refused(found.length === 0 ? "ERR_JWKS_NO_MATCHING_KEY" : "ERR_JWKS_MULTIPLE_MATCHING_KEYS"))
    const key = found[0]!
    if (token.signature.length !== key.signatureBytes) return Effect.succeed(refused("ERR_JWS_SIGNATURE_VERIFICATION_FAILED"))
    return Effect.async((resume) => {
      verify(digestOf(token.alg), token.signingInput, verifyKey(token.alg, key.key), token.signature, (error, valid) =>
        // The claim mapping runs app code (tenant, check): inside Effect, so a throw fails this
        // request's verdict instead of escaping the callback and ending the process.
        resume(
          error === null && valid
            ? Effect.try(() => verdictOfPayload(token.payload, now)).pipe(
              Effect.orElseSucceed(() => refused("ERR_JWT_CLAIM_MAPPING_FAILED"))
            )
            : Effect.succeed(refused("ERR_JWS_SIGNATURE_VERIFICATION_FAILED"))
        ))
    })
  }

  // Locate and load the keys, verify, and on an unknown kid refetch once (cooldown permitting).
  const slowPath = (token: Token, now: number) =>
    Effect.gen(function*() {
      const url = yield* locate
      const keySet = yield* Jwks.keySet(url, jwks)
      const found = Jwks.candidates(keySet, token.alg, token.kid)
      if (found.length > 0) return yield* verified(token, found, now)
      const newer = yield* Jwks.keySetAfterUnknownKid(url, keySet, jwks)
      return yield* verified(token, newer === undefined ? [] : Jwks.candidates(newer, token.alg, token.kid), now)
    }).pipe(Effect.catchAll((error) =>
      // The verdict reason can reach the client: it names no URL; the log keeps the detail.
      Effect.logWarning(`auth strategy "${options.id}": ${LogText.quote(error.message)}`).pipe(
        Effect.as(failed({
          reason: `the identity provider's ${error._tag === "JwksUnavailable" ? "key set" : "discovery document"} is unavailable: ${error.reason}`
        }))
      )
    ))

  return {
    id: options.id,
    outboundHosts: hostsOf(keys),
    securitySchemes: securitySchemesOf(options.id, options.cookieName),
    authenticate: ({ headers }) => {
      const raw = tokenOf(headers, options.cookieName)
      if (raw === undefined) return noMatch
      if (raw.length > maxTokenBytes) return tooLarge
      // Refused before any fetch: garbage tokens cannot make the strategy contact the provider.
      const token = parse(raw, algorithms)
      if (typeof token === "string") return Effect.succeed(refused(token))
      return Effect.clockWith((clock) => {
        const now = clock.unsafeCurrentTimeMillis()
        const url = knownUrl()
        const keySet = url === undefined ? undefined : Jwks.freshKeySet(url, now, jwks)
        const found = keySet === undefined ? [] : Jwks.candidates(keySet, token.alg, token.kid)
        // Hot path: a warm key set holding the token's key costs no fetch logic.
        return found.length === 0 ? slowPath(token, now) : verified(token, found, now)
      })
    }
  }
}

export { StrategyConfigInvalid } from "./Errors.js"
