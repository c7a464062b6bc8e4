/**
 * `samlSsoPlugin(options)`: SAML 2.0 single sign-on for an app (spec 2.7, 3.4, 4.4, 5.3), mounted
 * under `/saml`:
 *
 * - `GET /saml/metadata`: the SP metadata (no XML library needed);
 * - `GET /saml/login?returnTo=`: an AuthnRequest by redirect, signed iff `privateKey`; its id is
 *   remembered for the ACS while replay protection is on (and, with an https ACS, bound to the
 *   browser by a cookie, against login CSRF); `returnTo` must be a local path;
 * - `POST /saml/acs`: the validated assertion becomes a Subject through `onLogin`, then the
 *   `fw:session` cookie every session strategy reads, a companion cookie naming the IdP session,
 *   and a redirect to `returnTo` or `successRedirect`;
 * - `GET /saml/logout`: clears the session and sends a LogoutRequest to the IdP when the request
 *   is same-site; from elsewhere, a page whose button posts to `POST /saml/logout` (same-origin
 *   only), so another site cannot log the user out;
 * - `GET|POST /saml/slo`: a signed IdP LogoutRequest ends the session and is answered with a
 *   LogoutResponse; the IdP's LogoutResponse completes an SP logout. Unsigned: 401 before any XML
 *   library is touched; a bad signature: 401, session untouched.
 *
 * Rejected messages answer 400 (not a SAML message) or 401 (refused), with a reason code and
 * nothing of the message or the configuration. The routes run as the anonymous caller: a stale
 * session cookie must not block the login that replaces it.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Either, Layer, Option, Redacted, Schedule } from "effect"
import type { KeyObject } from "node:crypto"
import * as Plugin from "../app/Plugin.js"
import { readCookie } from "../app/AuthStrategy.js"
import * as Session from "../auth/Session.js"
import * as Subject from "../kernel/Subject.js"
import * as Answers from "./Answers.js"
import * as Companion from "./Companion.js"
import { reject, SamlConfigInvalid, SamlLibraryUnavailable } from "./Errors.js"
import * as IdpSource from "./IdpSource.js"
import * as InboundLogout from "./InboundLogout.js"
import * as Keys from "./Keys.js"
import * as Libraries from "./Libraries.js"
import * as LoginResponse from "./LoginResponse.js"
import * as Messages from "./Messages.js"
import * as Metadata from "./Metadata.js"
import * as OneTimeIds from "./OneTimeIds.js"
import { SamlLogout, SamlReplay } from "./tables.js"
import * as Xml from "./Xml.js"
import * as Settings from "../app/Settings.js"

/** A secret: from configuration (`Config.redacted`) or a string read from the environment. */
export type Secret = string | Redacted.Redacted<string>

/** The Subject `onLogin` maps a profile to. */
export interface SubjectInput {
  readonly type: string
  readonly id: string
  readonly tenantId: string | null
  readonly metadata?: Readonly<Record<string, unknown>>
  readonly scopes?: ReadonlyArray<string>
}

/** The options of spec table 2.7. */
export interface Options {
  readonly idp: IdpSource.Options
  readonly sp: {
    readonly entityId: string
    readonly acsUrl: string
    /** The SP single-logout endpoint; default `/saml/slo` on the ACS URL's origin. */
    readonly sloUrl?: string
  }
  readonly sessionSecret: Secret
  /** Maps the validated identity (with `email` and `nameId`) to the Subject the session is for. */
  readonly onLogin: (
    profile: LoginResponse.Profile
  ) => SubjectInput | Effect.Effect<SubjectInput, unknown, Plugin.Services>
  readonly successRedirect?: string
  readonly logoutRedirect?: string
  /** `{store: true}` shares SLO state across replicas in `_fw_saml_logout`; default in-process. */
  readonly sloStore?: { readonly store: true }
  /** SP private key (PEM) that decrypts encrypted assertions. */
  readonly decryptionPvk?: Secret
  /** SP private key (PEM) that signs AuthnRequests and logout messages. */
  readonly privateKey?: Secret
  /** Published in the SP metadata. */
  readonly signingCert?: string
  readonly acceptedClockSkewMs?: number
  readonly wantAuthnResponseSigned?: boolean
  /** Default `{store: true}` (`_fw_saml_replay`, 10 minutes); `true` in-process; `false` off (boot warns). */
  readonly replayProtection?: { readonly store: true; readonly ttlMs?: number } | boolean
  /** Mark the cookies `Secure` (default: when the ACS URL is https). */
  readonly secureCookies?: boolean
}

/** Default lifetime of an outstanding AuthnRequest (spec section 8). */
export const defaultReplayTtlMs = 10 * 60_000
const sessionSeconds = Session.defaultMaxAgeSeconds
const sweepInterval = "5 minutes"
// A posted message is at most `Xml.maxMessageBytes` once decoded; base64 and form encoding stay
// under twice that, so the body cap refuses anything larger before it is read.
const maxPostBytes = Xml.maxMessageBytes * 2

const reveal = (secret: Secret) => (typeof secret === "string" ? secret : Redacted.value(secret))

/** The SAML plugin. Throws `SamlConfigInvalid` (or `SessionSecretTooShort`) for a configuration it cannot run with. */
export const samlSsoPlugin = (options: Options): Plugin.Plugin => {
  const sessionSecret = reveal(options.sessionSecret)
  Session.checkSecretSync(sessionSecret)
  Settings.checkNonNegativeInteger("acceptedClockSkewMs", options.acceptedClockSkewMs)
  Settings.checkNonNegativeInteger("idp.metadataRefreshMs", options.idp.metadataRefreshMs)
  if (typeof options.replayProtection === "object") Settings.checkPositiveInteger("replayProtection.ttlMs", options.replayProtection.ttlMs)
  for (const url of [options.sp.acsUrl, options.sp.sloUrl]) {
    if (url !== undefined && !URL.canParse(url)) throw new SamlConfigInvalid({ reason: `"${url}" is not an absolute URL` })
  }
  const sloUrl = options.sp.sloUrl ?? new URL("/saml/slo", options.sp.acsUrl).href
  const signingKey: KeyObject | undefined = options.privateKey === undefined ? undefined : Keys.privateKey(reveal(options.privateKey), "privateKey")
  const decryptionKey = options.decryptionPvk === undefined ? undefined : Keys.privateKey(reveal(options.decryptionPvk), "decryptionPvk")
  IdpSource.check(options.idp)
  const idp = IdpSource.make(options.idp)
  const replay = options.replayProtection ?? { store: true }
  const replayTtlMs = typeof replay === "object" ? replay.ttlMs ?? defaultReplayTtlMs : defaultReplayTtlMs
  const replayIds = replay === false ? undefined : replay === true ? OneTimeIds.inProcess() : OneTimeIds.stored(SamlReplay)
  const logoutIds = options.sloStore?.store === true ? OneTimeIds.stored(SamlLogout) : OneTimeIds.inProcess()
  const clockSkewMs = options.acceptedClockSkewMs ?? 0
  const secure = options.secureCookies ?? options.sp.acsUrl.startsWith("https:")
  const companionCookie = (value: string, maxAgeSeconds: number) =>
    HttpServerResponse.unsafeSetCookie(Companion.cookieName, value, {
      path: "/",
      maxAge: `${maxAgeSeconds} seconds`,
      httpOnly: true,
      sameSite: "lax",
      secure
    })

  // Login CSRF: the AuthnRequest id is bound to the browser that started the login, by a cookie
  // the ACS requires. The ACS is reached by a cross-site POST, so the cookie must be
  // `SameSite=None`, which browsers accept only with `Secure`: the binding is on when the ACS is
  // https (and replay protection, which keeps the ids, is on).
  const bindsBrowser = replayIds !== undefined && options.sp.acsUrl.startsWith("https:")
  const requestCookieName = (id: string) => `fw_saml_req${id}`
  const requestCookie = (id: string, maxAgeSeconds: number) =>
    HttpServerResponse.unsafeSetCookie(requestCookieName(id), maxAgeSeconds > 0 ? "1" : "", {
      path: "/",
      maxAge: `${maxAgeSeconds} seconds`,
      httpOnly: true,
      sameSite: "none",
      secure: true
    })

  /** A redirect that ends the browser's session (both cookies). */
  const endSession = (location: string) =>
    HttpServerResponse.redirect(location, { status: 302, headers: { "set-cookie": Session.clearSessionCookie() } }).pipe(
      companionCookie("", 0)
    )

  const metadata: Plugin.Route = {
    method: "GET",
    path: "/saml/metadata",
    anonymous: true,
    handler: Effect.succeed(HttpServerResponse.text(
      Metadata.sp({
        entityId: options.sp.entityId,
        acsUrl: options.sp.acsUrl,
        sloUrl,
        signingCert: options.signingCert,
        signsRequests: signingKey !== undefined
      }),
      { contentType: "application/samlmetadata+xml" }
    ))
  }

  const login: Plugin.Route = {
    method: "GET",
    path: "/saml/login",
    anonymous: true,
    handler: Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const returnTo = new URL(request.url, "http://local.invalid").searchParams.get("returnTo") ?? undefined
      if (returnTo !== undefined && !Answers.isLocalPath(returnTo)) return Answers.answer(400, "return_to", "returnTo must be a local path")
      const settings = yield* idp.current
      const id = Messages.newId()
      const now = yield* Clock.currentTimeMillis
      if (replayIds !== undefined) yield* replayIds.issue("request", id, now + replayTtlMs)
      const xml = Messages.authnRequest({
        id,
        issueInstant: now,
        destination: settings.entryPoint,
        acsUrl: options.sp.acsUrl,
        spEntityId: options.sp.entityId
      })
      const redirect = HttpServerResponse.redirect(
        Messages.redirectUrl({ location: settings.entryPoint, parameter: "SAMLRequest", xml, relayState: returnTo, key: signingKey }),
        { status: 302 }
      )
      return bindsBrowser ? redirect.pipe(requestCookie(id, Math.ceil(replayTtlMs / 1000))) : redirect
    }).pipe(Effect.catchTags({ SamlIdpUnavailable: Answers.unavailable }))
  }

  /** The one-time checks of a valid response: it answers a request we issued, and is seen once. */
  const checkOnce = (validated: LoginResponse.Validated, now: number, headers: HttpServerRequest.HttpServerRequest["headers"]) =>
    Effect.gen(function*() {
      if (replayIds === undefined) return Either.right(undefined)
      if (validated.inResponseTo === undefined) {
        return Either.left(reject("unsolicited", "an unsolicited response (no InResponseTo) with replay protection on"))
      }
      // Checked before the id is consumed: a response carried into another browser does not spend it.
      if (bindsBrowser && readCookie(headers, requestCookieName(validated.inResponseTo)) !== "1") {
        return Either.left(reject("in_response_to", "the response answers a login this browser did not start"))
      }
      if (!(yield* replayIds.consume("request", validated.inResponseTo, now))) {
        return Either.left(reject("in_response_to", "the response answers no outstanding request"))
      }
      if (!(yield* replayIds.firstSight("assertion", validated.assertionId, validated.expiresAt, now))) {
        return Either.left(reject("replay", "the assertion was used before"))
      }
      return Either.right(undefined)
    })

  const acs: Plugin.Route = {
    method: "POST",
    path: "/saml/acs",
    anonymous: true,
    maxBodyBytes: maxPostBytes,
    handler: Effect.gen(function*() {
      const form = yield* Answers.formOf
      const posted = form.get("SAMLResponse")
      if (posted === null) return Answers.answer(400, "malformed", "SAMLResponse is missing")
      const xml = Messages.decodePosted(posted)
      if (Either.isLeft(xml)) return Answers.refused(xml.left)
      const libraries = yield* Libraries.load
      const settings = yield* idp.current
      const now = yield* Clock.currentTimeMillis
      const validated = yield* Effect.either(LoginResponse.validate(libraries, xml.right, {
        idpEntityId: settings.entityId,
        spEntityId: options.sp.entityId,
        acsUrl: options.sp.acsUrl,
        keys: settings.keys,
        decryptionKey,
        wantAuthnResponseSigned: options.wantAuthnResponseSigned ?? false,
        clockSkewMs,
        now
      }))
      if (Either.isLeft(validated)) return Answers.refused(validated.left)
      const request = yield* HttpServerRequest.HttpServerRequest
      const once = yield* checkOnce(validated.right, now, request.headers)
      if (Either.isLeft(once)) return Answers.refused(once.left)

      const mapped = options.onLogin(validated.right.profile)
      const subject = Subject.make(Effect.isEffect(mapped) ? yield* mapped : mapped)
      // The session ends when the IdP said its session ends (SessionNotOnOrAfter), if sooner.
      const granted = validated.right.sessionNotOnOrAfter
      const maxAgeSeconds = granted === undefined ? sessionSeconds : Math.max(1, Math.min(sessionSeconds, Math.floor((granted - now) / 1000)))
      const session = yield* Session.issueSession(subject, sessionSecret, { maxAgeSeconds })
      const { nameId, nameIdFormat, sessionIndex } = validated.right.profile
      const relayState = form.get("RelayState")
      const location = relayState !== null && Answers.isLocalPath(relayState) ? relayState : options.successRedirect ?? "/"
      return HttpServerResponse.redirect(location, {
        status: 302,
        headers: { "set-cookie": Session.sessionCookie(session, { maxAgeSeconds, secure }) }
      }).pipe(
        companionCookie(Companion.seal({ nameId, nameIdFormat, sessionIndex }, now + maxAgeSeconds * 1000, sessionSecret), maxAgeSeconds),
        (response) => bindsBrowser && validated.right.inResponseTo !== undefined ? requestCookie(validated.right.inResponseTo, 0)(response) : response
      )
    }).pipe(Effect.catchTags({ SamlIdpUnavailable: Answers.unavailable, SamlLibraryUnavailable: Answers.unavailable }))
  }

  /** Ends the browser's session and, when the IdP has an SLO endpoint, sends it a LogoutRequest. */
  const logOut = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const now = yield* Clock.currentTimeMillis
    const landing = options.logoutRedirect ?? "/"
    const cookie = readCookie(request.headers, Companion.cookieName)
    const name = cookie === undefined ? Option.none() : Companion.open(cookie, sessionSecret, now)
    const settings = yield* Effect.option(idp.current)
    if (Option.isNone(name) || Option.isNone(settings) || settings.value.sloUrl === undefined) return endSession(landing)
    const id = Messages.newId()
    yield* logoutIds.issue("logout", id, now + replayTtlMs)
    const xml = Messages.logoutRequest({
      id,
      issueInstant: now,
      destination: settings.value.sloUrl,
      spEntityId: options.sp.entityId,
      name: name.value
    })
    return endSession(Messages.redirectUrl({
      location: settings.value.sloUrl,
      parameter: "SAMLRequest",
      xml,
      relayState: undefined,
      key: signingKey
    }))
  })

  // Spec 4.4 defines logout as a GET, which any page can trigger (a link, an image): the session
  // ends only when the browser says the request is same-site (or typed by the user); otherwise the
  // answer is a page whose button posts back from this origin.
  const logout: Plugin.Route = {
    method: "GET",
    path: "/saml/logout",
    anonymous: true,
    handler: Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Answers.sameSite(request.headers) ? logOut : Effect.succeed(Answers.logoutConfirmation("/saml/logout")))
  }

  /** The confirmation page's post: from this origin only (a cross-site form post is refused). */
  const logoutPost: Plugin.Route = {
    method: "POST",
    path: "/saml/logout",
    anonymous: true,
    maxBodyBytes: 1024,
    handler: Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Answers.sameOrigin(request.headers) ? logOut : Effect.succeed(Answers.answer(403, "cross_site", "log out from this site's own page")))
  }

  const slo = (binding: "redirect" | "post") =>
    Effect.gen(function*() {
      const read = yield* InboundLogout.receive(binding, {
        idp,
        sloUrl,
        clockSkewMs,
        rememberMs: replayTtlMs
      })
      if (Either.isLeft(read)) return read.left
      const { message, relayState, settings } = read.right
      const now = yield* Clock.currentTimeMillis
      if (message._tag === "LogoutResponse") {
        if (message.inResponseTo === undefined || !(yield* logoutIds.consume("logout", message.inResponseTo, now))) {
          return Answers.refused(reject("in_response_to", "the LogoutResponse answers no outstanding LogoutRequest"))
        }
        return endSession(options.logoutRedirect ?? "/")
      }
      if (!(yield* logoutIds.firstSight("idp-logout", message.id, message.expiresAt, now))) {
        return Answers.refused(reject("replay", "the LogoutRequest was used before"))
      }
      // The browser's session ends when it is the one the IdP names (its NameID, and its session
      // index when the request lists some).
      const request = yield* HttpServerRequest.HttpServerRequest
      const cookie = readCookie(request.headers, Companion.cookieName)
      const name = cookie === undefined ? Option.none() : Companion.open(cookie, sessionSecret, now)
      const ours = Option.isSome(name) && name.value.nameId === message.nameId &&
        (message.sessionIndexes.length === 0 || name.value.sessionIndex === null || message.sessionIndexes.includes(name.value.sessionIndex))
      const destination = settings.sloResponseUrl ?? settings.sloUrl
      if (destination === undefined) {
        const done = HttpServerResponse.text("logged out")
        return ours
          ? done.pipe(HttpServerResponse.setHeader("set-cookie", Session.clearSessionCookie()), companionCookie("", 0))
          : done
      }
      const xml = Messages.logoutResponse({
        id: Messages.newId(),
        issueInstant: now,
        destination,
        spEntityId: options.sp.entityId,
        inResponseTo: message.id
      })
      const location = Messages.redirectUrl({ location: destination, parameter: "SAMLResponse", xml, relayState, key: signingKey })
      return ours ? endSession(location) : HttpServerResponse.redirect(location, { status: 302 })
    }).pipe(Effect.catchTags({ SamlIdpUnavailable: Answers.unavailable, SamlLibraryUnavailable: Answers.unavailable }))

  // Spec 5.5: `store:write` unless replay protection is off and SLO state stays in-process.
  const writesStore = replay !== false || options.sloStore?.store === true
  const metadataHost = options.idp.metadataUrl === undefined ? undefined : new URL(options.idp.metadataUrl).host
  const refreshMs = options.idp.metadataRefreshMs ?? 0

  const background = Layer.scopedDiscard(Effect.gen(function*() {
    // Said at boot, not only on the first login: the packages are optional peers an install may lack.
    const missing = Libraries.unresolvable()
    if (missing.length > 0) {
      yield* Effect.logError(new SamlLibraryUnavailable({ detail: `cannot be resolved: ${missing.join(", ")}` }).message)
    }
    const unusable = IdpSource.unusableFallback(options.idp)
    if (unusable !== undefined) yield* Effect.logWarning(`samlSsoPlugin: ${unusable}`)
    if (replay === false) {
      yield* Effect.logWarning(
        "samlSsoPlugin: replayProtection is off — unsolicited (IdP-initiated) responses are accepted and a captured response can be replayed until it expires"
      )
    }
    if (metadataHost !== undefined && refreshMs > 0) {
      yield* Effect.forkScoped(Effect.repeat(Effect.delay(idp.refresh, refreshMs), Schedule.forever))
    }
    const sweep = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (replayIds !== undefined) yield* replayIds.sweep(now)
      yield* logoutIds.sweep(now)
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("SAML one-time id sweep failed", cause)))
    yield* Effect.forkScoped(Effect.repeat(Effect.delay(sweep, sweepInterval), Schedule.forever))
  }))

  return Plugin.definePlugin({
    name: "saml",
    permissions: [
      ...(writesStore ? (["store:write"] as const) : []),
      ...(metadataHost === undefined ? [] : [`network:outbound:${metadataHost}` as const])
    ],
    tables: [...(typeof replay === "object" ? [SamlReplay] : []), ...(options.sloStore?.store === true ? [SamlLogout] : [])],
    layer: background,
    routes: [
      metadata,
      login,
      acs,
      logout,
      logoutPost,
      { method: "GET", path: "/saml/slo", anonymous: true, handler: slo("redirect") },
      { method: "POST", path: "/saml/slo", anonymous: true, maxBodyBytes: maxPostBytes, handler: slo("post") }
    ]
  })
}
