/**
 * Strategies for the hosted identity providers of spec table 2.5, generic OIDC and generic JWT
 * bearer tokens. Each is `JwtStrategy.make` with the provider's key location, issuer format,
 * audience behaviour, cookie and tenant claim as defaults (facts in
 * notes/auth-providers-saml.md §1); every default can be overridden, and every strategy accepts
 * `defaultTenantId`, an algorithm allow-list, a clock tolerance and JWKS cache tuning.
 */
import { Option, Schema } from "effect"
import type * as Subject from "../kernel/Subject.js"
import type * as AuthStrategy from "../app/AuthStrategy.js"
import * as Claims from "./Claims.js"
import type * as Jwks from "./Jwks.js"
import * as JwtStrategy from "./JwtStrategy.js"
import * as SharedSecretStrategy from "./SharedSecretStrategy.js"

/** Options every strategy accepts. */
export interface Common {
  /** Tenant used when the token names none (otherwise such a token fails). */
  readonly defaultTenantId?: string
  /** The asymmetric allow-list (default RS256 and ES256). */
  readonly algorithms?: ReadonlyArray<JwtStrategy.Algorithm>
  /** Seconds of skew tolerated on `exp` and `nbf` (default 5). */
  readonly clockToleranceSeconds?: number
  readonly jwks?: Jwks.Options
}

const common = (options: Common) => ({
  ...(options.defaultTenantId === undefined ? {} : { defaultTenantId: options.defaultTenantId }),
  ...(options.algorithms === undefined ? {} : { algorithms: options.algorithms }),
  ...(options.clockToleranceSeconds === undefined ? {} : { clockToleranceSeconds: options.clockToleranceSeconds }),
  ...(options.jwks === undefined ? {} : { jwks: options.jwks })
})

const trimSlash = (url: string) => url.replace(/\/+$/, "")
const cookieOr = (cookieName: string | null | undefined, fallback: string | null) => cookieName === undefined ? fallback : cookieName

/** Provider A's verified claims, typed (spec 2.5). */
export const IdpAClaims = Schema.Struct({
  sub: Schema.String,
  email: Schema.optional(Schema.String),
  org_id: Schema.optional(Schema.String),
  role: Schema.optional(Schema.String),
  permissions: Schema.optional(Schema.Array(Schema.String))
})

/** Provider A's verified claims, typed (spec 2.5). */
export type IdpAClaims = typeof IdpAClaims.Type

const decodeIdpAClaims = Schema.decodeUnknownOption(IdpAClaims)

/** The typed provider-A claims of a subject authenticated by `idpAStrategy`. */
export const idpAClaims = (subject: Subject.Subject): Option.Option<IdpAClaims> =>
  subject.metadata.provider === "idp_a" ? decodeIdpAClaims(subject.metadata.claims) : Option.none()

/** The default API base URL of provider A (override with `apiBaseUrl`, e.g. in tests). */
export const idpADefaultApi = "https://api.workos.com"

/**
 * Provider A (`idp_a`): JWKS `{api}/sso/jwks/<clientId>`; issuer `{api}` or
 * `{api}/user_management/<clientId>` (both formats are live, DESIGN "Provider A"); its access tokens
 * carry no `aud`, so there is no audience check unless `audience` is given; cookie `idp_a-session`
 * (a cookie the app sets with the raw access token: the vendor's own cookie is sealed, not a JWT);
 * tenant `org_id`.
 */
export const idpAStrategy = (options: Common & {
  readonly clientId: string
  readonly apiBaseUrl?: string
  readonly jwksUrl?: string
  readonly issuer?: string | ReadonlyArray<string>
  readonly audience?: string | ReadonlyArray<string>
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy => {
  const api = trimSlash(options.apiBaseUrl ?? idpADefaultApi)
  return JwtStrategy.make({
    id: "idp_a",
    keys: { jwksUrl: options.jwksUrl ?? `${api}/sso/jwks/${options.clientId}` },
    issuer: options.issuer ?? [api, `${api}/user_management/${options.clientId}`],
    audience: options.audience ?? null,
    cookieName: cookieOr(options.cookieName, "idp_a-session"),
    tenantFromClaims: (claims) => Claims.stringClaim(claims, "org_id"),
    ...common(options)
  })
}

/**
 * Provider B (`idp_b`): issuer `https://<subdomain>.<host>` (no trailing slash); JWKS
 * `<issuer>/.well-known/jwks`; audience checked only when configured (its `aud` is a list, often
 * empty); cookie `idp_b_access_token`; tenant `org_code` (access tokens), else `org_codes[0]` (ID tokens).
 */
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
    cookieName: cookieOr(options.cookieName, "idp_b_access_token"),
    tenantFromClaims: (claims) => Claims.stringClaim(claims, "org_code") ?? Claims.stringClaim(claims, "org_codes.0"),
    ...common(options)
  })

/**
 * Provider C (`idp_c`): everything from the frontend API URL (JWKS
 * `<frontendApi>/.well-known/jwks.json`, issuer `<frontendApi>`); tokens carry no `aud`, so the
 * audience is checked only when configured; `authorizedParties` checks `azp` when given; cookie
 * `__session`; tenant `org_id`, falling back to `o.id` (the newer token format, DESIGN "Provider C").
 */
export const idpCStrategy = (options: Common & {
  readonly frontendApi: string
  readonly jwksUrl?: string
  readonly issuer?: string
  readonly audience?: string | ReadonlyArray<string>
  readonly authorizedParties?: ReadonlyArray<string>
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy => {
  const frontendApi = trimSlash(options.frontendApi)
  const parties = options.authorizedParties
  return JwtStrategy.make({
    id: "idp_c",
    keys: { jwksUrl: options.jwksUrl ?? `${frontendApi}/.well-known/jwks.json` },
    issuer: options.issuer ?? frontendApi,
    audience: options.audience ?? null,
    cookieName: cookieOr(options.cookieName, "__session"),
    tenantFromClaims: (claims) => Claims.stringClaim(claims, "org_id") ?? Claims.stringClaim(claims, "o.id"),
    ...(parties === undefined ? {} : {
      check: (claims) => {
        const azp = Claims.stringClaim(claims, "azp")
        return azp !== null && parties.includes(azp) ? null : "the token's authorized party is not allowed"
      }
    }),
    ...common(options)
  })
}

/** The namespace of fw's custom claims on providers that require namespaced claims (provider D). */
export const claimNamespace = "https://fw.dev"

/**
 * Provider D (`idp_d`): issuer `https://<domain>/` (the trailing slash matters); JWKS
 * `https://<domain>/.well-known/jwks.json`; audience required; tenant from the namespaced claim
 * `https://fw.dev/tenant` or `tenantClaim`; header only unless `cookieName` is given.
 */
export const idpDStrategy = (options: Common & {
  readonly domain: string
  readonly audience: string | ReadonlyArray<string>
  readonly jwksUrl?: string
  readonly issuer?: string
  readonly tenantClaim?: string
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy => {
  const tenantClaim = options.tenantClaim ?? `${claimNamespace}/tenant`
  return JwtStrategy.make({
    id: "idp_d",
    keys: { jwksUrl: options.jwksUrl ?? `https://${options.domain}/.well-known/jwks.json` },
    issuer: options.issuer ?? `https://${options.domain}/`,
    audience: options.audience,
    cookieName: cookieOr(options.cookieName, null),
    tenantFromClaims: (claims) => Claims.stringClaim(claims, tenantClaim),
    ...common(options)
  })
}

/** Where provider E's keys come from: the hosted project, a self-hosted JWKS, or a shared secret. */
export type IdpEKeys =
  | { readonly projectRef: string; readonly jwksUrl?: string; readonly issuer?: string; readonly jwtSecret?: undefined }
  | { readonly jwksUrl: string; readonly issuer: string; readonly projectRef?: undefined; readonly jwtSecret?: undefined }
  | { readonly jwtSecret: string; readonly projectRef: string; readonly issuer?: string; readonly jwksUrl?: undefined }
  | { readonly jwtSecret: string; readonly issuer: string; readonly projectRef?: undefined; readonly jwksUrl?: undefined }

/**
 * Provider E (`idp_e`): hosted (`projectRef`: issuer `https://<ref>.supabase.co/auth/v1`, JWKS under
 * it) or self-hosted (`jwksUrl` + `issuer`); audience `authenticated`; header only by default (its
 * SDK cookie is a JSON session, not a bare JWT); tenant `app_metadata.tenant_id`
 * (server-controlled; never `user_metadata`, which users edit). `jwtSecret` selects the separate
 * shared-secret verifier (HS256) for legacy projects; it never mixes with the JWKS path.
 */
export const idpEStrategy = (options: Common & IdpEKeys & {
  readonly tenantClaim?: string
  readonly audience?: string | ReadonlyArray<string>
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy => {
  const hosted = options.projectRef === undefined ? undefined : `https://${options.projectRef}.supabase.co/auth/v1`
  // The union guarantees one of them; the fallback only satisfies the compiler.
  const issuer = options.issuer ?? hosted ?? ""
  const tenantClaim = options.tenantClaim ?? "app_metadata.tenant_id"
  const mapping = {
    id: "idp_e",
    tenantFromClaims: (claims: Claims.Claims) => Claims.stringClaim(claims, tenantClaim),
    ...(options.defaultTenantId === undefined ? {} : { defaultTenantId: options.defaultTenantId })
  }
  const audience = options.audience ?? "authenticated"
  const cookieName = cookieOr(options.cookieName, null)
  if (options.jwtSecret !== undefined) {
    return SharedSecretStrategy.make({
      ...mapping,
      secret: options.jwtSecret,
      issuer,
      audience,
      cookieName,
      ...(options.clockToleranceSeconds === undefined ? {} : { clockToleranceSeconds: options.clockToleranceSeconds })
    })
  }
  return JwtStrategy.make({
    ...common(options),
    ...mapping,
    keys: { jwksUrl: options.jwksUrl ?? `${hosted}/.well-known/jwks.json` },
    issuer,
    audience,
    cookieName,
    algorithms: options.algorithms ?? ["ES256", "RS256"]
  })
}

/**
 * Generic OIDC: keys found by discovery of `${issuer}/.well-known/openid-configuration` (or
 * `discoveryUrl`) on the first request, cached for the process, unless `jwksUrl` is given. The
 * tenant is the claim at `tenantClaim` (dotted or exact path: `realm_access.tenant`,
 * `custom:tenant_id`, `tid`, `hd`, a namespaced URL), else `defaultTenantId`; one of them is required.
 * `outboundHosts` names the discovery host; when the provider serves its keys from another host,
 * pass `jwksUrl` (or declare that host on the app).
 */
export const oidcStrategy = (options: Common & {
  readonly id: string
  readonly issuer: string
  readonly audience: string | ReadonlyArray<string>
  readonly tenantClaim?: string
  readonly jwksUrl?: string
  readonly discoveryUrl?: string
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy => {
  const tenantClaim = options.tenantClaim
  if (tenantClaim === undefined && options.defaultTenantId === undefined) {
    throw new JwtStrategy.StrategyConfigInvalid({ strategy: options.id, reason: "give a tenantClaim or a defaultTenantId" })
  }
  return JwtStrategy.make({
    id: options.id,
    keys: options.jwksUrl !== undefined
      ? { jwksUrl: options.jwksUrl }
      : { discover: { issuer: options.issuer, ...(options.discoveryUrl === undefined ? {} : { discoveryUrl: options.discoveryUrl }) } },
    issuer: options.issuer,
    audience: options.audience,
    cookieName: cookieOr(options.cookieName, null),
    tenantFromClaims: (claims) => tenantClaim === undefined ? null : Claims.stringClaim(claims, tenantClaim),
    ...common(options)
  })
}

/** Generic JWT bearer: explicit JWKS URL, issuer and audience; the tenant is a function of the claims. */
export const jwtBearerStrategy = (options: Common & {
  readonly id: string
  readonly jwksUrl: string
  readonly issuer: string | ReadonlyArray<string>
  readonly audience: string | ReadonlyArray<string>
  readonly tenantIdFromClaims: (claims: Claims.Claims) => string | null
  readonly cookieName?: string | null
}): AuthStrategy.AuthStrategy =>
  JwtStrategy.make({
    id: options.id,
    keys: { jwksUrl: options.jwksUrl },
    issuer: options.issuer,
    audience: options.audience,
    cookieName: cookieOr(options.cookieName, null),
    tenantFromClaims: options.tenantIdFromClaims,
    ...common(options)
  })
