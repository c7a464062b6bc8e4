/**
 * Hosted login for provider A (spec 2.6, 3.3, 4.3, 5.2), the login-only model: the two primitives
 * over raw HTTP (no vendor SDK), then the ready-made routes `GET /auth/idp_a/login` and
 * `GET /auth/idp_a/callback` an app mounts as a plugin; the callback provisions the local user
 * and mints the app's own `fw:session`.
 */
import { HttpClient, HttpClientRequest, HttpClientResponse, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Config, Effect, Option, Redacted, Schema } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import * as Plugin from "../app/Plugin.js"
import * as LogText from "../kernel/LogText.js"
import type * as Subject from "../kernel/Subject.js"
import { readCookie } from "../app/AuthStrategy.js"
import { idpADefaultApi } from "./IdentityProviders.js"
import * as Provisioning from "./Provisioning.js"
import * as Session from "./Session.js"
import { Organizations, Users } from "./tables.js"
import { IdpAExchangeFailed, IdpAStateMismatchError } from "./Errors.js"

/** The profile of a user who logged in with provider A. */
export interface IdpAProfile {
  readonly idpAUserId: string
  readonly email: string
  /** The provider's `email_verified` (false when it does not say). */
  readonly emailVerified: boolean
  readonly firstName: string | null
  readonly lastName: string | null
  readonly organizationId: string | null
}

const apiOf = (apiBaseUrl: string | undefined) => (apiBaseUrl ?? idpADefaultApi).replace(/\/+$/, "")
const randomToken = () => randomBytes(32).toString("base64url")

/**
 * Starts a login: a fresh CSRF `state`, a PKCE verifier, and the hosted-login URL carrying the
 * state and the S256 challenge (`provider=authkit` selects the provider's hosted UI).
 */
export const idpABeginLogin = (options: {
  readonly clientId: string
  readonly redirectUri: string
  readonly apiBaseUrl?: string
}): Effect.Effect<{ readonly url: string; readonly state: string; readonly codeVerifier: string }> =>
  Effect.sync(() => {
    const state = randomToken()
    const codeVerifier = randomToken()
    const url = new URL(`${apiOf(options.apiBaseUrl)}/user_management/authorize`)
    url.search = new URLSearchParams({
      client_id: options.clientId,
      redirect_uri: options.redirectUri,
      response_type: "code",
      provider: "authkit",
      state,
      code_challenge: createHash("sha256").update(codeVerifier).digest("base64url"),
      code_challenge_method: "S256"
    }).toString()
    return { url: url.toString(), state, codeVerifier }
  })

/** Constant time whatever the lengths: both sides are hashed to 32 bytes first. */
const sameState = (a: string, b: string) => {
  const digest = (value: string) => createHash("sha256").update(value).digest()
  return timingSafeEqual(digest(a), digest(b))
}

const AuthenticateResponse = Schema.Struct({
  user: Schema.Struct({
    id: Schema.NonEmptyString,
    // An empty or malformed address would merge distinct users on the email lookup.
    email: Schema.String.pipe(Schema.pattern(/^[^@\s]+@[^@\s]+$/)),
    email_verified: Schema.optional(Schema.Boolean),
    first_name: Schema.optional(Schema.NullOr(Schema.String)),
    last_name: Schema.optional(Schema.NullOr(Schema.String))
  }),
  organization_id: Schema.optional(Schema.NullOr(Schema.String))
})

/**
 * Exchanges the authorization code for the user's profile (`POST {api}/user_management/authenticate`).
 * The constant-time state comparison happens here, before any network call. Server-only: it
 * carries the API key.
 */
export const idpAAuthenticateWithCode = (options: {
  readonly clientId: string
  readonly apiKey: string
  readonly code: string
  readonly state: string
  readonly expectedState: string
  readonly codeVerifier: string
  readonly apiBaseUrl?: string
}): Effect.Effect<IdpAProfile, IdpAStateMismatchError | IdpAExchangeFailed, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    // An empty state (a missing parameter against an emptied cookie) is never a match.
    if (options.expectedState === "" || !sameState(options.state, options.expectedState)) return yield* new IdpAStateMismatchError()
    const client = yield* HttpClient.HttpClient
    const response = yield* HttpClientRequest.post(`${apiOf(options.apiBaseUrl)}/user_management/authenticate`).pipe(
      HttpClientRequest.acceptJson,
      HttpClientRequest.bodyUnsafeJson({
        client_id: options.clientId,
        client_secret: options.apiKey,
        grant_type: "authorization_code",
        code: options.code,
        code_verifier: options.codeVerifier
      }),
      client.execute,
      Effect.mapError((error) => new IdpAExchangeFailed({ status: null, reason: `the provider is unreachable (${error._tag})` }))
    )
    if (response.status < 200 || response.status >= 300) {
      return yield* new IdpAExchangeFailed({ status: response.status, reason: `the provider answered ${response.status}` })
    }
    const body = yield* HttpClientResponse.schemaBodyJson(AuthenticateResponse)(response).pipe(
      Effect.mapError(() => new IdpAExchangeFailed({ status: response.status, reason: "unexpected answer from the provider" }))
    )
    return {
      idpAUserId: body.user.id,
      email: body.user.email,
      emailVerified: body.user.email_verified ?? false,
      firstName: body.user.first_name ?? null,
      lastName: body.user.last_name ?? null,
      organizationId: body.organization_id ?? null
    }
  }).pipe(
    Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new IdpAExchangeFailed({ status: null, reason: "no answer within 10 s" }) })
  )

/** The default provisioner of the routes: `Provisioning.findOrProvision` over the Store. */
export const provisionIdpAUser = (profile: IdpAProfile) =>
  Provisioning.findOrProvision({
    provider: "idp_a",
    externalId: profile.idpAUserId,
    email: profile.email,
    emailVerified: profile.emailVerified,
    firstName: profile.firstName,
    lastName: profile.lastName,
    organizationId: profile.organizationId
  })

/** Options of the hosted-login routes. */
export interface RoutesOptions {
  /** Signs `fw:session` (at least 32 bytes). */
  readonly sessionSecret: string
  /** Maps a profile to the local Subject (default `provisionIdpAUser`). */
  readonly provision?: (profile: IdpAProfile) => Effect.Effect<Subject.Subject, unknown, Plugin.Services>
  /** Where the browser lands after login (default `/`). */
  readonly landingPath?: string
  readonly apiBaseUrl?: string
  /** Mark cookies `Secure` (default: unless `IDP_A_REDIRECT_URI` is plain http). */
  readonly secureCookies?: boolean
}

/** The cookie carrying the login's CSRF state to the callback (spec 4.3). */
export const stateCookie = "idp_a-oauth-state"
/** The cookie carrying the login's PKCE verifier to the callback (spec 4.3). */
export const verifierCookie = "idp_a-oauth-verifier"
// Lifetimes of spec section 8.
const loginCookieSeconds = 600
const sessionSeconds = 604_800

const present = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.length > 0)))

/** `IDP_A_*` read with Effect `Config` at request time: each is optional, and the routes answer 503 until set. */
const env = Effect.all({
  clientId: present("IDP_A_CLIENT_ID"),
  apiKey: present("IDP_A_API_KEY").pipe(Config.map(Option.map(Redacted.make))),
  redirectUri: present("IDP_A_REDIRECT_URI")
}).pipe(Effect.orElseSucceed(() => ({ clientId: Option.none<string>(), apiKey: Option.none<Redacted.Redacted>(), redirectUri: Option.none<string>() })))

const text = (status: number, body: string) => HttpServerResponse.text(body, { status })
const notConfigured = text(503, "hosted login is not configured")

const loginCookie = (secure: boolean, maxAgeSeconds: number) =>
  ({ path: "/", maxAge: `${maxAgeSeconds} seconds`, httpOnly: true, sameSite: "lax", secure }) as const

/**
 * `GET /auth/idp_a/login` and `GET /auth/idp_a/callback` (spec 4.3, 3.3), configured from
 * `IDP_A_CLIENT_ID`, `IDP_A_API_KEY` and `IDP_A_REDIRECT_URI`. Throws `SessionSecretTooShort`
 * for a session secret under 32 bytes.
 */
export const idpAHostedLoginRoutes = (options: RoutesOptions): ReadonlyArray<Plugin.Route> => {
  Session.checkSecretSync(options.sessionSecret)
  const provision = options.provision ?? provisionIdpAUser
  const api = options.apiBaseUrl === undefined ? {} : { apiBaseUrl: options.apiBaseUrl }
  const secureFor = (redirectUri: Option.Option<string>) =>
    options.secureCookies ?? !Option.getOrElse(redirectUri, () => "https:").startsWith("http:")

  const login: Plugin.Route = {
    method: "GET",
    path: "/auth/idp_a/login",
    anonymous: true,
    handler: Effect.gen(function*() {
      const { apiKey, clientId, redirectUri } = yield* env
      if (Option.isNone(clientId) || Option.isNone(apiKey) || Option.isNone(redirectUri)) return notConfigured
      const begun = yield* idpABeginLogin({ clientId: clientId.value, redirectUri: redirectUri.value, ...api })
      const secure = secureFor(redirectUri)
      return HttpServerResponse.redirect(begun.url, { status: 302 }).pipe(
        HttpServerResponse.unsafeSetCookie(stateCookie, begun.state, loginCookie(secure, loginCookieSeconds)),
        HttpServerResponse.unsafeSetCookie(verifierCookie, begun.codeVerifier, loginCookie(secure, loginCookieSeconds))
      )
    })
  }

  const callback: Plugin.Route = {
    method: "GET",
    path: "/auth/idp_a/callback",
    anonymous: true,
    handler: Effect.gen(function*() {
      const { apiKey, clientId, redirectUri } = yield* env
      if (Option.isNone(clientId) || Option.isNone(apiKey)) return notConfigured
      const request = yield* HttpServerRequest.HttpServerRequest
      const query = new URL(request.url, "http://callback").searchParams
      const code = query.get("code")
      if (code === null || code.length === 0) return text(400, "missing authorization code")
      const expectedState = readCookie(request.headers, stateCookie)
      const codeVerifier = readCookie(request.headers, verifierCookie)
      if (!expectedState || !codeVerifier) return text(400, "the login state cookie is missing")
      const profile = yield* Effect.either(idpAAuthenticateWithCode({
        clientId: clientId.value,
        apiKey: Redacted.value(apiKey.value),
        code,
        state: query.get("state") ?? "",
        expectedState,
        codeVerifier,
        ...api
      }))
      if (profile._tag === "Left") {
        if (profile.left._tag === "IdpAStateMismatchError") return text(400, profile.left.message)
        yield* Effect.logWarning(`hosted login: the code exchange failed: ${LogText.quote(profile.left.reason)}`)
        return text(502, "the identity provider could not complete the login")
      }
      const provisioned = yield* Effect.either(provision(profile.right))
      if (provisioned._tag === "Left") {
        if (provisioned.left instanceof Provisioning.ProvisioningRefused) return text(403, provisioned.left.message)
        return yield* Effect.fail(provisioned.left)
      }
      const subject = provisioned.right
      const session = yield* Session.issueSession(subject, options.sessionSecret, { maxAgeSeconds: sessionSeconds })
      const secure = secureFor(redirectUri)
      // `fw:session` is not a valid cookie name for the platform's Cookies (the colon), so it is
      // written as a raw header, which the server sends next to the cookies set below.
      return HttpServerResponse.redirect(options.landingPath ?? "/", {
        status: 302,
        headers: { "set-cookie": Session.sessionCookie(session, { maxAgeSeconds: sessionSeconds, secure }) }
      }).pipe(
        // The one-time login cookies are spent.
        HttpServerResponse.unsafeSetCookie(stateCookie, "", loginCookie(secure, 0)),
        HttpServerResponse.unsafeSetCookie(verifierCookie, "", loginCookie(secure, 0))
      )
    })
  }
  return [login, callback]
}

/**
 * The hosted-login routes as a plugin, with the user and organisation tables, `store:write` and
 * the provider API host as its one outbound host.
 */
export const idpAHostedLoginPlugin = (options: RoutesOptions): Plugin.Plugin =>
  Plugin.definePlugin({
    name: "idp_a-login",
    permissions: ["store:write", `network:outbound:${new URL(apiOf(options.apiBaseUrl)).host}`],
    tables: [Users, Organizations],
    routes: idpAHostedLoginRoutes(options)
  })

export { IdpAExchangeFailed, IdpAStateMismatchError } from "./Errors.js"
