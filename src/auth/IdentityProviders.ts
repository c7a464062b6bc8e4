/**
 * Strategies for the hosted identity providers of spec table 2.5 and generic OIDC / JWT bearer
 * tokens. Each is `JwtStrategy.make` with the provider's key location, issuer format, audience
 * behaviour, cookie and tenant claim as defaults.
 */
import { Clock, Effect } from "effect"
import * as jose from "jose"
import * as AuthStrategy from "./AuthStrategy.js"
import * as JwtStrategy from "./JwtStrategy.js"
import type * as Jwks from "./Jwks.js"

/** Options every provider strategy accepts. */
interface Common {
  readonly defaultTenantId?: string
  readonly algorithms?: ReadonlyArray<JwtStrategy.Algorithm>
  readonly jwks?: Jwks.Options
}

const withCommon = (options: Common) => ({
  ...(options.defaultTenantId === undefined ? {} : { defaultTenantId: options.defaultTenantId }),
  ...(options.algorithms === undefined ? {} : { algorithms: options.algorithms }),
  ...(options.jwks === undefined ? {} : { jwks: options.jwks })
})

const trimSlash = (url: string) => url.replace(/\/+$/, "")

/** Provider A's typed claims. */
export interface IdpAClaims extends jose.JWTPayload {
  readonly sub: string
  readonly email?: string
  readonly org_id?: string
  readonly role?: string
  readonly permissions?: ReadonlyArray<string>
}

/** The default API base URL of provider A (override with `apiBaseUrl`, e.g. in tests). */
export const idpADefaultApi = "https://api.workos.com"

/**
 * Provider A: JWKS `{api}/sso/jwks/<clientId>`; issuer `{api}` or `{api}/user_management/<clientId>`
 * (both formats are live); no audience on its access tokens; cookie `idp_a-session`; tenant `org_id`.
 */
export const idpAStrategy = (options: Common & {
  readonly clientId: string
  readonly apiBaseUrl?: string
  readonly jwksUrl?: string
  readonly issuer?: string | ReadonlyArray<string>
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy => {
  const api = trimSlash(options.apiBaseUrl ?? idpADefaultApi)
  return JwtStrategy.make({
    id: "idp_a",
    keys: { jwksUrl: options.jwksUrl ?? `${api}/sso/jwks/${options.clientId}` },
    issuer: options.issuer ?? [api, `${api}/user_management/${options.clientId}`],
    audience: null,
    cookieName: options.cookieName === undefined ? "idp_a-session" : options.cookieName,
    tenantFromClaims: (claims) => JwtStrategy.stringClaim(claims, "org_id"),
    ...withCommon(options)
  })
}

/** Provider B: issuer `https://<sub>.<host>`; JWKS `<issuer>/.well-known/jwks`; tenant `org_code`, else `org_codes[0]`. */
export const idpBStrategy = (options: Common & {
  readonly issuer: string
  readonly jwksUrl?: string
  readonly audience?: string | ReadonlyArray<string>
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy =>
  JwtStrategy.make({
    id: "idp_b",
    keys: { jwksUrl: options.jwksUrl ?? `${trimSlash(options.issuer)}/.well-known/jwks` },
    issuer: trimSlash(options.issuer),
    audience: options.audience ?? null,
    cookieName: options.cookieName === undefined ? "idp_b_access_token" : options.cookieName,
    tenantFromClaims: (claims) => {
      const codes = JwtStrategy.claimAt(claims, "org_codes")
      return JwtStrategy.stringClaim(claims, "org_code") ??
        (Array.isArray(codes) && typeof codes[0] === "string" && codes[0].length > 0 ? codes[0] : null)
    },
    ...withCommon(options)
  })

/** Provider C: everything from the frontend API URL; no `aud` (checked only when configured); tenant `o.id`, else `org_id`. */
export const idpCStrategy = (options: Common & {
  readonly frontendApi: string
  readonly jwksUrl?: string
  readonly issuer?: string
  readonly audience?: string | ReadonlyArray<string>
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy => {
  const frontendApi = trimSlash(options.frontendApi)
  return JwtStrategy.make({
    id: "idp_c",
    keys: { jwksUrl: options.jwksUrl ?? `${frontendApi}/.well-known/jwks.json` },
    issuer: options.issuer ?? frontendApi,
    audience: options.audience ?? null,
    cookieName: options.cookieName === undefined ? "__session" : options.cookieName,
    tenantFromClaims: (claims) => JwtStrategy.stringClaim(claims, "o.id") ?? JwtStrategy.stringClaim(claims, "org_id"),
    ...withCommon(options)
  })
}

/** The namespace of fw's custom claims on providers that require namespaced claims (provider D). */
export const claimNamespace = "https://fw.dev"

/** Provider D: `https://<domain>/` issuer (trailing slash), audience required, tenant in a namespaced claim; header only by default. */
export const idpDStrategy = (options: Common & {
  readonly domain: string
  readonly audience: string | ReadonlyArray<string>
  readonly jwksUrl?: string
  readonly issuer?: string
  readonly tenantClaim?: string
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy =>
  JwtStrategy.make({
    id: "idp_d",
    keys: { jwksUrl: options.jwksUrl ?? `https://${options.domain}/.well-known/jwks.json` },
    issuer: options.issuer ?? `https://${options.domain}/`,
    audience: options.audience,
    cookieName: options.cookieName ?? null,
    tenantFromClaims: (claims) => JwtStrategy.stringClaim(claims, options.tenantClaim ?? `${claimNamespace}/tenant`),
    ...withCommon(options)
  })

/**
 * Provider E: hosted (`projectRef`) or self-hosted (`jwksUrl` + `issuer`); audience `authenticated`;
 * tenant `app_metadata.tenant_id` (server-controlled; never `user_metadata`). `jwtSecret` selects the
 * separate shared-secret (HS256) verifier for legacy projects; it never mixes with the JWKS path.
 */
export const idpEStrategy = (options: Common & (
  | { readonly projectRef: string; readonly jwksUrl?: string; readonly issuer?: string }
  | { readonly projectRef?: undefined; readonly jwksUrl: string; readonly issuer: string }
  | { readonly jwtSecret: string; readonly issuer: string; readonly projectRef?: undefined; readonly jwksUrl?: undefined }
) & {
  readonly tenantClaim?: string
  readonly audience?: string | ReadonlyArray<string>
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy => {
  const hosted = options.projectRef === undefined ? undefined : `https://${options.projectRef}.supabase.co/auth/v1`
  const issuer = options.issuer ?? hosted!
  const tenantFromClaims = (claims: jose.JWTPayload) => JwtStrategy.stringClaim(claims, options.tenantClaim ?? "app_metadata.tenant_id")
  const audience = options.audience ?? "authenticated"
  const cookieName = options.cookieName ?? null
  if ("jwtSecret" in options && options.jwtSecret !== undefined) {
    return sharedSecretStrategy({ id: "idp_e", secret: options.jwtSecret, issuer, audience, cookieName, tenantFromClaims, ...withCommon(options) })
  }
  return JwtStrategy.make({
    id: "idp_e",
    keys: { jwksUrl: options.jwksUrl ?? `${hosted}/.well-known/jwks.json` },
    issuer,
    audience,
    cookieName,
    tenantFromClaims,
    algorithms: options.algorithms ?? ["ES256", "RS256"],
    ...withCommon(options)
  })
}

/** The shared-secret (HS256) verifier: a separate, explicit path for legacy deployments. */
const sharedSecretStrategy = (options: {
  readonly id: string
  readonly secret: string
  readonly issuer: string
  readonly audience: string | ReadonlyArray<string>
  readonly cookieName: string | null
  readonly tenantFromClaims: (claims: jose.JWTPayload) => string | null
  readonly defaultTenantId?: string
}): AuthStrategy.AuthStrategy => {
  const key = new TextEncoder().encode(options.secret)
  return {
    id: options.id,
    outboundHosts: [],
    authenticate: ({ headers }) => {
      const token = JwtStrategy.tokenOf(headers, options.cookieName)
      if (token === undefined) return Effect.succeed(AuthStrategy.Verdict.NoMatch())
      if (token.length > JwtStrategy.maxTokenBytes) return Effect.succeed(AuthStrategy.Verdict.Failed({ reason: "token too large" }))
      return Clock.currentTimeMillis.pipe(
        Effect.flatMap((now) =>
          Effect.tryPromise(() =>
            jose.jwtVerify(token, key, {
              algorithms: ["HS256"],
              issuer: options.issuer,
              audience: typeof options.audience === "string" ? options.audience : [...options.audience],
              requiredClaims: ["exp"],
              clockTolerance: 5,
              currentDate: new Date(now)
            })
          )
        ),
        Effect.map((result) => JwtStrategy.verdictOf(options, result.payload)),
        Effect.orElseSucceed(() => AuthStrategy.Verdict.Failed({ reason: "invalid token" }))
      )
    }
  }
}

/** Generic OIDC: keys found by discovery of `${issuer}/.well-known/openid-configuration` (or `discoveryUrl`), unless `jwksUrl` is given. */
export const oidcStrategy = (options: Common & {
  readonly id: string
  readonly issuer: string
  readonly audience: string | ReadonlyArray<string>
  readonly tenantClaim: string
  readonly jwksUrl?: string
  readonly discoveryUrl?: string
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy =>
  JwtStrategy.make({
    id: options.id,
    keys: options.jwksUrl !== undefined
      ? { jwksUrl: options.jwksUrl }
      : { discover: { issuer: options.issuer, ...(options.discoveryUrl === undefined ? {} : { discoveryUrl: options.discoveryUrl }) } },
    issuer: options.issuer,
    audience: options.audience,
    cookieName: options.cookieName ?? null,
    tenantFromClaims: (claims) => JwtStrategy.stringClaim(claims, options.tenantClaim),
    ...withCommon(options)
  })

/** Generic JWT bearer: explicit JWKS URL, issuer and audience; the tenant comes from a function of the claims. */
export const jwtBearerStrategy = (options: Common & {
  readonly id: string
  readonly jwksUrl: string
  readonly issuer: string | ReadonlyArray<string>
  readonly audience: string | ReadonlyArray<string>
  readonly tenantIdFromClaims: (claims: jose.JWTPayload) => string | null
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy =>
  JwtStrategy.make({
    id: options.id,
    keys: { jwksUrl: options.jwksUrl },
    issuer: options.issuer,
    audience: options.audience,
    cookieName: options.cookieName ?? null,
    tenantFromClaims: options.tenantIdFromClaims,
    ...withCommon(options)
  })
