/**
 * The JWT verification strategy every identity provider builds on: take the token from
 * `Authorization: Bearer` or the strategy's cookie, verify its signature against the provider's
 * JWKS (asymmetric algorithms only, explicit allow-list), check issuer, audience and expiry, map
 * the claims to a Subject with a tenant, and keep the raw claims under `metadata.claims`.
 */
import { Clock, Effect } from "effect"
import type { HttpClient } from "@effect/platform"
import * as jose from "jose"
import * as Subject from "../kernel/Subject.js"
import * as AuthStrategy from "./AuthStrategy.js"
import * as Jwks from "./Jwks.js"

/** Asymmetric algorithms accepted on the JWKS path. */
export type Algorithm = "RS256" | "ES256" | "PS256" | "EdDSA"

/** Tokens larger than this are refused before any parsing. */
export const maxTokenBytes = 16 * 1024

/** Where a strategy's keys come from. */
export type KeySource =
  | { readonly jwksUrl: string }
  | { readonly discover: { readonly issuer: string; readonly discoveryUrl?: string } }

/** Options of `make`. */
export interface Options {
  /** Strategy id, carried as `metadata.provider`. */
  readonly id: string
  readonly keys: KeySource
  readonly issuer: string | ReadonlyArray<string>
  /** Omit (or null) for providers whose tokens carry no `aud`. */
  readonly audience?: string | ReadonlyArray<string> | null
  /** Cookie holding the token; null means the Authorization header only. */
  readonly cookieName: string | null
  /** The tenant of verified claims; null fails the verdict unless `defaultTenantId` is set. */
  readonly tenantFromClaims: (claims: jose.JWTPayload) => string | null
  readonly defaultTenantId?: string
  /** Default `["RS256", "ES256"]`. */
  readonly algorithms?: ReadonlyArray<Algorithm>
  /** Seconds of clock skew tolerated on `exp`/`nbf` (default 5). */
  readonly clockToleranceSeconds?: number
  readonly jwks?: Jwks.Options
}

/** Reads a claim by exact name first (`custom:tenant_id`, `https://x/tenant`), else by dotted path (`app_metadata.tenant_id`). */
export const claimAt = (claims: jose.JWTPayload, path: string): unknown => {
  if (path in claims) return claims[path]
  let current: unknown = claims
  for (const segment of path.split(".")) {
    if (typeof current !== "object" || current === null) return undefined
    current = (current as Record<string, unknown>)[segment]
  }
  return current
}

/** A claim as a non-empty string, or null. */
export const stringClaim = (claims: jose.JWTPayload, path: string): string | null => {
  const value = claimAt(claims, path)
  return typeof value === "string" && value.length > 0 ? value : null
}

/** Scopes from `scope`/`scp` (space-separated or list) and `permissions`. */
const scopesOf = (claims: jose.JWTPayload): ReadonlyArray<string> => {
  const list = (value: unknown) =>
    typeof value === "string" ? value.split(" ").filter((s) => s.length > 0) : Array.isArray(value) ? value.filter((s): s is string => typeof s === "string") : []
  return [...new Set([...list(claims.scope), ...list(claims.scp), ...list(claims.permissions)])]
}

/** Reads the token of a request: the bearer header first, then the cookie. */
export const tokenOf = (headers: AuthStrategy.AuthRequest["headers"], cookieName: string | null): string | undefined =>
  AuthStrategy.readBearer(headers) ?? (cookieName === null ? undefined : AuthStrategy.readCookie(headers, cookieName))

/** Host names a key source contacts. */
const hostsOf = (keys: KeySource): ReadonlyArray<string> => {
  const url = "jwksUrl" in keys ? keys.jwksUrl : keys.discover.discoveryUrl ?? keys.discover.issuer
  try {
    return [new URL(url).host]
  } catch {
    return []
  }
}

/** Maps verified claims to the strategy's verdict. */
export const verdictOf = (options: Pick<Options, "id" | "tenantFromClaims" | "defaultTenantId">, claims: jose.JWTPayload) => {
  if (typeof claims.sub !== "string" || claims.sub.length === 0) return AuthStrategy.Verdict.Failed({ reason: "the token has no subject" })
  const tenantId = options.tenantFromClaims(claims) ?? options.defaultTenantId ?? null
  if (tenantId === null) return AuthStrategy.Verdict.Failed({ reason: "the token names no tenant" })
  return AuthStrategy.Verdict.Authenticated({
    subject: Subject.make({
      type: "user",
      id: claims.sub,
      tenantId,
      scopes: scopesOf(claims),
      metadata: { provider: options.id, claims }
    })
  })
}

/** Builds a JWKS-verifying strategy. */
export const make = (options: Options): AuthStrategy.AuthStrategy => {
  const algorithms = [...(options.algorithms ?? ["RS256", "ES256"])]
  if (algorithms.some((alg) => alg.startsWith("HS"))) throw new Error(`${options.id}: symmetric algorithms are refused on the JWKS path`)
  const baseVerifyOptions: jose.JWTVerifyOptions = {
    algorithms,
    issuer: typeof options.issuer === "string" ? options.issuer : [...options.issuer],
    ...(options.audience === undefined || options.audience === null
      ? {}
      : { audience: typeof options.audience === "string" ? options.audience : [...options.audience] }),
    requiredClaims: ["exp"],
    clockTolerance: options.clockToleranceSeconds ?? 5
  }
  return {
    id: options.id,
    outboundHosts: hostsOf(options.keys),
    authenticate: ({ headers }) => {
      const token = tokenOf(headers, options.cookieName)
      if (token === undefined) return Effect.succeed(AuthStrategy.Verdict.NoMatch())
      if (token.length > maxTokenBytes) return Effect.succeed(AuthStrategy.Verdict.Failed({ reason: "token too large" }))
      const failed = (error: Jwks.JwksUnavailable | jose.errors.JOSEError) =>
        AuthStrategy.Verdict.Failed({
          reason: error instanceof Jwks.JwksUnavailable ? "the key set is unavailable" : `invalid token (${error.code})`
        })
      const slowPath = (verifyOptions: jose.JWTVerifyOptions) =>
        Effect.gen(function*() {
          const url = "jwksUrl" in options.keys
            ? options.keys.jwksUrl
            : yield* Jwks.discoverJwksUri(options.keys.discover.issuer, options.keys.discover.discoveryUrl, options.jwks)
          return verdictOf(options, yield* Jwks.verify(token, url, verifyOptions, options.jwks))
        }).pipe(Effect.catchAll((error) => Effect.succeed(failed(error))))
      return Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const verifyOptions: jose.JWTVerifyOptions = { ...baseVerifyOptions, currentDate: new Date(now) }
        const url = "jwksUrl" in options.keys
          ? options.keys.jwksUrl
          : Jwks.discoveredJwksUri(options.keys.discover.issuer, options.keys.discover.discoveryUrl)
        const keys = url === undefined ? undefined : Jwks.freshKeys(url, now, options.jwks)
        if (keys !== undefined) {
          // Hot path: a warm key set and a known kid need one promise and no fetch logic.
          return Effect.async<AuthStrategy.Verdict, never, HttpClient.HttpClient>((resume) => {
            jose.jwtVerify(token, keys, verifyOptions).then(
              (result) => resume(Effect.succeed(verdictOf(options, result.payload))),
              (error: unknown) =>
                resume(
                  error instanceof jose.errors.JOSEError && error.code === "ERR_JWKS_NO_MATCHING_KEY"
                    ? slowPath(verifyOptions)
                    : Effect.succeed(failed(error instanceof jose.errors.JOSEError ? error : new jose.errors.JOSEError(String(error))))
                )
            )
          })
        }
        return slowPath(verifyOptions)
      })

    }
  }
}
