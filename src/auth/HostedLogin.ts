/**
 * Hosted login for provider A (spec 2.6, 3.3, 4.3, 5.2): the two primitives over raw HTTP, the
 * find-or-provision of the local user and organisation, and the ready-made routes
 * `GET /auth/idp_a/login` and `GET /auth/idp_a/callback` an app mounts as a plugin.
 */
import { HttpClient, HttpClientRequest, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Config, Effect, Option, Redacted, Schema } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import * as Plugin from "../app/Plugin.js"
import { Store } from "../kernel/Store.js"
import * as Subject from "../kernel/Subject.js"
import { readCookie } from "./AuthStrategy.js"
import { idpADefaultApi } from "./IdentityProviders.js"
import * as Session from "./Session.js"
import { Organizations, Users } from "./tables.js"

/** The state returned to the callback is not the one this browser was given. */
export class IdpAStateMismatchError extends Schema.TaggedError<IdpAStateMismatchError>()("IdpAStateMismatchError", {}) {
  override get message() {
    return "the login state does not match"
  }
}

/** The provider refused or failed the code exchange. */
export class IdpAExchangeFailed extends Schema.TaggedError<IdpAExchangeFailed>()("IdpAExchangeFailed", {
  status: Schema.NullOr(Schema.Number),
  message: Schema.String
}) {}

/** The profile of a user who logged in. */
export interface IdpAProfile {
  readonly idpAUserId: string
  readonly email: string
  readonly firstName: string | null
  readonly lastName: string | null
  readonly organizationId: string | null
}

const base64url = (bytes: Buffer) => bytes.toString("base64url")
const apiOf = (apiBaseUrl: string | undefined) => (apiBaseUrl ?? idpADefaultApi).replace(/\/+$/, "")

/** Starts a login: a fresh CSRF state, a PKCE verifier, and the hosted-login URL carrying both. */
export const idpABeginLogin = (options: { readonly clientId: string; readonly redirectUri: string; readonly apiBaseUrl?: string }) =>
  Effect.sync(() => {
    const state = base64url(randomBytes(32))
    const codeVerifier = base64url(randomBytes(32))
    const url = new URL(`${apiOf(options.apiBaseUrl)}/user_management/authorize`)
    url.search = new URLSearchParams({
      client_id: options.clientId,
      redirect_uri: options.redirectUri,
      response_type: "code",
      provider: "authkit",
      state,
      code_challenge: base64url(createHash("sha256").update(codeVerifier).digest()),
      code_challenge_method: "S256"
    }).toString()
    return { url: url.toString(), state, codeVerifier }
  })

const sameState = (a: string, b: string) => {
  const digest = (value: string) => createHash("sha256").update(value).digest()
  return timingSafeEqual(digest(a), digest(b))
}

const AuthenticateResponse = Schema.Struct({
  user: Schema.Struct({
    id: Schema.String,
    email: Schema.String,
    first_name: Schema.optional(Schema.NullOr(Schema.String)),
    last_name: Schema.optional(Schema.NullOr(Schema.String))
  }),
  organization_id: Schema.optional(Schema.NullOr(Schema.String))
})

/**
 * Exchanges the authorization code for the user's profile. The state comparison (constant time)
 * happens here, before any network call.
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
    if (!sameState(options.state, options.expectedState)) return yield* new IdpAStateMismatchError()
    const client = yield* HttpClient.HttpClient
    const response = yield* HttpClientRequest.post(`${apiOf(options.apiBaseUrl)}/user_management/authenticate`).pipe(
      HttpClientRequest.bodyUnsafeJson({
        client_id: options.clientId,
        client_secret: options.apiKey,
        grant_type: "authorization_code",
        code: options.code,
        code_verifier: options.codeVerifier
      }),
      client.execute,
      Effect.timeout("10 seconds"),
      Effect.mapError((error) => new IdpAExchangeFailed({ status: null, message: `the provider is unreachable: ${error._tag}` }))
    )
    if (response.status < 200 || response.status >= 300) {
      return yield* new IdpAExchangeFailed({ status: response.status, message: `the provider answered ${response.status}` })
    }
    const body = yield* response.json.pipe(
      Effect.flatMap(Schema.decodeUnknown(AuthenticateResponse)),
      Effect.mapError(() => new IdpAExchangeFailed({ status: response.status, message: "unexpected answer from the provider" }))
    )
    return {
      idpAUserId: body.user.id,
      email: body.user.email,
      firstName: body.user.first_name ?? null,
      lastName: body.user.last_name ?? null,
      organizationId: body.organization_id ?? null
    }
  })

/**
 * The default provisioner: finds the local user by email; on a first login creates the
 * organisation (found again by the provider's organisation id) and the user. Runs as the system.
 */
export const provisionUser = (profile: IdpAProfile) =>
  Effect.gen(function*() {
    const store = yield* Store
    const [existing] = yield* store.find(Users, { where: { email: profile.email }, limit: 1 })
    const user = existing ?? (yield* Effect.gen(function*() {
      const [known] = profile.organizationId === null
        ? []
        : yield* store.find(Organizations, { where: { externalId: profile.organizationId }, limit: 1 })
      const organization = known ?? (yield* store.insert(Organizations, {
        name: profile.email.split("@")[1] ?? profile.email,
        provider: "idp_a",
        externalId: profile.organizationId
      }))
      return yield* store.insert(Users, {
        email: profile.email,
        firstName: profile.firstName,
        lastName: profile.lastName,
        organizationId: organization.id,
        provider: "idp_a",
        externalId: profile.idpAUserId
      })
    }))
    return Subject.make({
      type: "user",
      id: user.id,
      tenantId: user.organizationId,
      metadata: { provider: "idp_a", email: user.email }
    })
  }).pipe(Subject.asSystem)

/** Options of the hosted-login routes. */
export interface RoutesOptions {
  readonly sessionSecret: string
  /** Maps a profile to the local Subject (default `provisionUser`). */
  readonly provision?: (profile: IdpAProfile) => Effect.Effect<Subject.Subject, unknown, Store>
  /** Where the browser lands after login (default `/`). */
  readonly landingPath?: string
  readonly apiBaseUrl?: string
  /** Mark cookies `Secure` (default true unless the redirect URI is plain http). */
  readonly secureCookies?: boolean
}

const stateCookie = "idp_a-oauth-state"
const verifierCookie = "idp_a-oauth-verifier"
const loginCookieOptions = { path: "/", maxAge: "600 seconds", httpOnly: true, sameSite: "lax" } as const

const text = (status: number, body: string) => HttpServerResponse.text(body, { status })

const env = Effect.all({
  clientId: Config.option(Config.string("IDP_A_CLIENT_ID")),
  apiKey: Config.option(Config.redacted("IDP_A_API_KEY")),
  redirectUri: Config.option(Config.string("IDP_A_REDIRECT_URI"))
}).pipe(Effect.orElseSucceed(() => ({ clientId: Option.none(), apiKey: Option.none(), redirectUri: Option.none() })))

/** `GET /auth/idp_a/login` and `GET /auth/idp_a/callback`, configured from `IDP_A_*` env (503 until set). */
export const idpAHostedLoginRoutes = (options: RoutesOptions): ReadonlyArray<Plugin.Route> => {
  const provision = options.provision ?? provisionUser
  const login: Plugin.Route = {
    method: "GET",
    path: "/auth/idp_a/login",
    handler: Effect.gen(function*() {
      const { clientId, redirectUri } = yield* env
      if (Option.isNone(clientId) || Option.isNone(redirectUri)) return text(503, "hosted login is not configured")
      const begun = yield* idpABeginLogin({
        clientId: clientId.value,
        redirectUri: redirectUri.value,
        ...(options.apiBaseUrl === undefined ? {} : { apiBaseUrl: options.apiBaseUrl })
      })
      return HttpServerResponse.redirect(begun.url, { status: 302 }).pipe(
        HttpServerResponse.unsafeSetCookie(stateCookie, begun.state, loginCookieOptions),
        HttpServerResponse.unsafeSetCookie(verifierCookie, begun.codeVerifier, loginCookieOptions)
      )
    })
  }
  const callback: Plugin.Route = {
    method: "GET",
    path: "/auth/idp_a/callback",
    handler: Effect.gen(function*() {
      const { apiKey, clientId, redirectUri } = yield* env
      if (Option.isNone(clientId) || Option.isNone(apiKey)) return text(503, "hosted login is not configured")
      const request = yield* HttpServerRequest.HttpServerRequest
      const query = new URL(request.url, "http://fw").searchParams
      const code = query.get("code")
      if (code === null || code.length === 0) return text(400, "missing authorization code")
      const expectedState = readCookie(request.headers, stateCookie)
      const codeVerifier = readCookie(request.headers, verifierCookie)
      if (expectedState === undefined || codeVerifier === undefined) return text(400, "the login state cookie is missing")
      const profile = yield* idpAAuthenticateWithCode({
        clientId: clientId.value,
        apiKey: Redacted.value(apiKey.value),
        code,
        state: query.get("state") ?? "",
        expectedState,
        codeVerifier,
        ...(options.apiBaseUrl === undefined ? {} : { apiBaseUrl: options.apiBaseUrl })
      }).pipe(Effect.either)
      if (profile._tag === "Left") {
        return profile.left._tag === "IdpAStateMismatchError"
          ? text(400, profile.left.message)
          : text(502, "the identity provider could not complete the login")
      }
      const subject = yield* provision(profile.right)
      const secure = options.secureCookies ?? !(Option.getOrElse(redirectUri, () => "https:").startsWith("http:"))
      const session = yield* Session.issueSession(subject, options.sessionSecret, { maxAgeSeconds: 604_800 })
      return HttpServerResponse.redirect(options.landingPath ?? "/", {
        status: 302,
        headers: { "set-cookie": Session.sessionCookie(session, { maxAgeSeconds: 604_800, secure }) }
      }).pipe(
        HttpServerResponse.unsafeSetCookie(stateCookie, "", { ...loginCookieOptions, maxAge: 0 }),
        HttpServerResponse.unsafeSetCookie(verifierCookie, "", { ...loginCookieOptions, maxAge: 0 })
      )
    })
  }
  return [login, callback]
}

/** The hosted-login routes as a plugin (with the user and organisation tables and the outbound host). */
export const idpAHostedLoginPlugin = (options: RoutesOptions): Plugin.Plugin =>
  Plugin.definePlugin({
    name: "idp_a-login",
    permissions: ["store:write", `network:outbound:${new URL(apiOf(options.apiBaseUrl)).host}`],
    tables: [Users, Organizations],
    routes: idpAHostedLoginRoutes(options)
  })
