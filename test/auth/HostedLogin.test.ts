/**
 * Hosted login for provider A against a loopback stand-in for its API (authorize, code exchange,
 * JWKS): the primitives, then the routes served on a plain HttpLayerRouter with the `IDP_A_*`
 * settings from a ConfigProvider.
 */
import { FetchHttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import {
  idpAAuthenticateWithCode,
  idpABeginLogin,
  IdpAExchangeFailed,
  idpAHostedLoginRoutes,
  IdpAStateMismatchError
} from "../../src/auth/HostedLogin.js"
import { idpAStrategy } from "../../src/auth/IdentityProviders.js"
import * as Session from "../../src/auth/Session.js"
import { Organizations, Users } from "../../src/auth/tables.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Browser from "./support/Browser.js"
import { serveRoutes } from "./support/RouteServer.js"
import * as StandIn from "./support/IdpAStandIn.js"
import { authenticate, bearer, expectSubject } from "./support/Verdicts.js"

const sessionSecret = "hosted-login-session-secret-0123456789"

describe("provider A primitives", () => {
  it.effect("idpABeginLogin: a hosted-login URL with a fresh state and a PKCE S256 challenge", () =>
    Effect.gen(function*() {
      const first = yield* idpABeginLogin({ clientId: "client_1", redirectUri: "https://app.test/auth/idp_a/callback" })
      const second = yield* idpABeginLogin({ clientId: "client_1", redirectUri: "https://app.test/auth/idp_a/callback" })
      const url = new URL(first.url)
      assert.strictEqual(`${url.origin}${url.pathname}`, "https://api.workos.com/user_management/authorize")
      assert.deepStrictEqual(Object.fromEntries(url.searchParams), {
        client_id: "client_1",
        redirect_uri: "https://app.test/auth/idp_a/callback",
        response_type: "code",
        provider: "authkit",
        state: first.state,
        code_challenge: createHash("sha256").update(first.codeVerifier).digest("base64url"),
        code_challenge_method: "S256"
      })
      assert.isAtLeast(first.state.length, 43)
      assert.isAtLeast(first.codeVerifier.length, 43)
      assert.notStrictEqual(first.state, second.state)
      assert.notStrictEqual(first.codeVerifier, second.codeVerifier)
      const local = yield* idpABeginLogin({ clientId: "c", redirectUri: "http://x/cb", apiBaseUrl: "http://127.0.0.1:1/" })
      assert.isTrue(local.url.startsWith("http://127.0.0.1:1/user_management/authorize?"))
    }))

  it.scopedLive("idpAAuthenticateWithCode: the profile; a state mismatch fails before any request; provider errors are typed", () =>
    Effect.gen(function*() {
      const standIn = yield* StandIn.start
      const begun = yield* idpABeginLogin({ clientId: StandIn.clientId, redirectUri: "http://app.test/cb", apiBaseUrl: standIn.url })
      const atProvider = yield* Browser.get(begun.url)
      const code = new URL(atProvider.location!).searchParams.get("code")!
      const exchange = (overrides: Partial<Parameters<typeof idpAAuthenticateWithCode>[0]>) =>
        idpAAuthenticateWithCode({
          clientId: StandIn.clientId,
          apiKey: StandIn.apiKey,
          code,
          state: begun.state,
          expectedState: begun.state,
          codeVerifier: begun.codeVerifier,
          apiBaseUrl: standIn.url,
          ...overrides
        })
      for (const state of ["forged", `${begun.state}x`, begun.state.slice(1), ""]) {
        assert.instanceOf(yield* Effect.flip(exchange({ state })), IdpAStateMismatchError)
      }
      assert.strictEqual(standIn.exchanges(), 0)
      const wrongVerifier = yield* Effect.flip(exchange({ codeVerifier: "not-the-verifier" }))
      assert.instanceOf(wrongVerifier, IdpAExchangeFailed)
      assert.strictEqual((wrongVerifier as IdpAExchangeFailed).status, 400)
      assert.notInclude(wrongVerifier.message, StandIn.apiKey)
      assert.deepStrictEqual(yield* exchange({}), {
        idpAUserId: "user_01",
        email: "ada@acme.test",
        emailVerified: true,
        firstName: "Ada",
        lastName: "Lovelace",
        organizationId: "org_01"
      })
      // Codes are single-use at the provider.
      assert.strictEqual((yield* Effect.flip(exchange({}))).message, "the code exchange failed: the provider answered 400")
      const unreachable = yield* Effect.flip(exchange({ apiBaseUrl: "http://127.0.0.1:9" }))
      assert.isTrue(unreachable instanceof IdpAExchangeFailed && unreachable.status === null)
    }).pipe(Effect.provide(FetchHttpClient.layer)))
})

/** The settings of a fully configured app. */
const configured = (app: string): Record<string, string> => ({
  IDP_A_CLIENT_ID: StandIn.clientId,
  IDP_A_API_KEY: StandIn.apiKey,
  IDP_A_REDIRECT_URI: `${app}/auth/idp_a/callback`
})

/** The stand-in, a memory Store, and the routes on a plain router reading `settings` through a ConfigProvider. */
const start = (
  settings: (app: string) => Record<string, string>,
  routeOptions: Partial<Parameters<typeof idpAHostedLoginRoutes>[0]> = {}
) =>
  Effect.gen(function*() {
    const standIn = yield* StandIn.start
    const stores = yield* Layer.build(Store.layerMemory.pipe(Layer.provide(ChangeTap.layerLocal)))
    // The redirect URI names the app's own port, known once it listens; settings are read per request.
    const values = new Map<string, string>()
    const logs: Array<string> = []
    const url = yield* serveRoutes(
      idpAHostedLoginRoutes({ sessionSecret, apiBaseUrl: standIn.url, landingPath: "/home", ...routeOptions }),
      { store: Layer.succeedContext(stores), config: () => ConfigProvider.fromMap(values), logs }
    )
    for (const [name, value] of Object.entries(settings(url))) values.set(name, value)
    return { standIn, url, store: Context.get(stores, Store.Store), logs }
  })

/** Runs the browser's side of a login: the login route, the provider, then the callback. */
/** Starts a login at `app` and follows it to the provider, whose answer redirects to the callback. */
const toProvider = (app: string, browser: ReturnType<typeof Browser.jar>) =>
  Effect.gen(function*() {
    const started = yield* Browser.get(`${app}/auth/idp_a/login`, browser.header())
    browser.take(started)
    const atProvider = yield* Browser.get(started.location!)
    return { started, atProvider }
  })

const logIn = (app: string, browser: ReturnType<typeof Browser.jar>) =>
  Effect.gen(function*() {
    const { started, atProvider } = yield* toProvider(app, browser)
    const callback = yield* Browser.get(atProvider.location!, browser.header())
    browser.take(callback)
    return { started, atProvider, callback }
  })

const countRows = (store: Store.StoreShape) =>
  Effect.all([store.count(Users), store.count(Organizations)]).pipe(Subject.asSystem)

describe("hosted-login routes on a plain router", () => {
  it.scopedLive("answer 503 until IDP_A_* are set", () =>
    Effect.gen(function*() {
      const { url } = yield* start(() => ({}))
      for (const path of ["/auth/idp_a/login", "/auth/idp_a/callback?code=c&state=s"]) {
        const answer = yield* Browser.get(`${url}${path}`)
        assert.deepStrictEqual([answer.status, answer.body], [503, "hosted login is not configured"])
      }
      const partial = yield* start(() => ({ IDP_A_CLIENT_ID: StandIn.clientId, IDP_A_API_KEY: StandIn.apiKey }))
      assert.strictEqual((yield* Browser.get(`${partial.url}/auth/idp_a/login`)).status, 503)
      // The callback needs the client id and the API key only (spec 4.3).
      assert.strictEqual((yield* Browser.get(`${partial.url}/auth/idp_a/callback?state=s`)).status, 400)
      const empty = yield* start((app) => ({ ...configured(app), IDP_A_API_KEY: "" }))
      assert.strictEqual((yield* Browser.get(`${empty.url}/auth/idp_a/callback?code=c`)).status, 503)
    }))

  it.scopedLive("a round trip: state and verifier cookies, the exchange, provisioning once, fw:session and a 302 to the landing page", () =>
    Effect.gen(function*() {
      const { standIn, store, url } = yield* start(configured)
      const browser = Browser.jar()
      const first = yield* logIn(url, browser)
      assert.strictEqual(first.started.status, 302)
      assert.isTrue(first.started.location!.startsWith(`${standIn.url}/user_management/authorize?`))
      for (const name of ["idp_a-oauth-state", "idp_a-oauth-verifier"]) {
        const line = Browser.setCookie(first.started, name)!
        for (const attribute of ["Max-Age=600", "Path=/", "HttpOnly", "SameSite=Lax"]) assert.include(line, attribute)
        assert.notInclude(line, "Secure")
      }
      assert.strictEqual(new URL(first.started.location!).searchParams.get("state"), Browser.setCookie(first.started, "idp_a-oauth-state")!.split(/[=;]/)[1])
      assert.deepStrictEqual([first.callback.status, first.callback.location], [302, "/home"])
      const sessionLine = Browser.setCookie(first.callback, "fw:session")!
      for (const attribute of ["Path=/", "Max-Age=604800", "HttpOnly", "SameSite=Lax"]) assert.include(sessionLine, attribute)
      // The one-time login cookies are spent.
      assert.isUndefined(browser.get("idp_a-oauth-state"))
      assert.isUndefined(browser.get("idp_a-oauth-verifier"))
      const subject = yield* Session.verifySession(browser.get("fw:session")!, sessionSecret)
      assert.deepStrictEqual([subject.type, subject.metadata.provider, subject.metadata.email], ["user", "idp_a", "ada@acme.test"])
      assert.deepStrictEqual(yield* countRows(store), [1, 1])
      const [organization] = yield* store.find(Organizations).pipe(Subject.asSystem)
      assert.strictEqual(subject.tenantId, organization!.id)
      assert.strictEqual(organization!.externalId, "org_01")

      // A later login finds the user by email: the same subject, nothing new provisioned.
      browser.clear()
      const second = yield* logIn(url, browser)
      assert.strictEqual(second.callback.status, 302)
      assert.deepStrictEqual(yield* Session.verifySession(browser.get("fw:session")!, sessionSecret), subject)
      assert.deepStrictEqual(yield* countRows(store), [1, 1])

      // A colleague in the same provider organisation joins the same tenant.
      standIn.logInAs({ id: "user_02", email: "grace@acme.test", firstName: "Grace", lastName: "Hopper", organizationId: "org_01" })
      browser.clear()
      yield* logIn(url, browser)
      const colleague = yield* Session.verifySession(browser.get("fw:session")!, sessionSecret)
      assert.notStrictEqual(colleague.id, subject.id)
      assert.strictEqual(colleague.tenantId, subject.tenantId)
      assert.deepStrictEqual(yield* countRows(store), [2, 1])
      assert.strictEqual(standIn.exchanges(), 3)

      // The access token of the exchange verifies with idpAStrategy over the provider's JWKS.
      const [accessToken] = yield* standIn.accessTokens()
      const strategy = idpAStrategy({ clientId: StandIn.clientId, apiBaseUrl: standIn.url })
      expectSubject(yield* authenticate(strategy, bearer(accessToken!)), "org_01", "idp_a")
    }))

  it.scopedLive("a state that does not match the cookie is a 400, before any exchange", () =>
    Effect.gen(function*() {
      const { standIn, url } = yield* start(configured)
      const browser = Browser.jar()
      const { atProvider } = yield* toProvider(url, browser)
      const forged = new URL(atProvider.location!)
      forged.searchParams.set("state", "forged")
      const answer = yield* Browser.get(forged.toString(), browser.header())
      assert.deepStrictEqual([answer.status, answer.body], [400, "the login state does not match"])
      assert.isUndefined(Browser.setCookie(answer, "fw:session"))
      assert.strictEqual(standIn.exchanges(), 0)
    }))

  it.scopedLive("a missing code, or missing state cookies, is a 400", () =>
    Effect.gen(function*() {
      const { standIn, url } = yield* start(configured)
      const browser = Browser.jar()
      const { atProvider } = yield* toProvider(url, browser)
      const withoutCode = new URL(atProvider.location!)
      withoutCode.searchParams.delete("code")
      const noCode = yield* Browser.get(withoutCode.toString(), browser.header())
      assert.deepStrictEqual([noCode.status, noCode.body], [400, "missing authorization code"])
      const noCookies = yield* Browser.get(atProvider.location!)
      assert.deepStrictEqual([noCookies.status, noCookies.body], [400, "the login state cookie is missing"])
      const stateOnly = yield* Browser.get(atProvider.location!, `idp_a-oauth-state=${browser.get("idp_a-oauth-state")}`)
      assert.strictEqual(stateOnly.status, 400)
      assert.strictEqual(standIn.exchanges(), 0)
    }))

  it.scopedLive("a failing code exchange is a 502 that leaks nothing and sets no session", () =>
    Effect.gen(function*() {
      const { logs, standIn, store, url } = yield* start(configured)
      standIn.failExchanges(true)
      const browser = Browser.jar()
      const { callback } = yield* logIn(url, browser)
      assert.deepStrictEqual([callback.status, callback.body], [502, "the identity provider could not complete the login"])
      assert.isUndefined(browser.get("fw:session"))
      assert.strictEqual(standIn.exchanges(), 1)
      assert.deepStrictEqual(yield* countRows(store), [0, 0])
      // The operator is told why, in the log (not in the answer).
      assert.deepStrictEqual(logs, ["WARN hosted login: the code exchange failed: \"the provider answered 400\""])
    }))

  it.scopedLive("a custom provisioner decides the subject; cookies are Secure behind an https redirect URI", () =>
    Effect.gen(function*() {
      const provisioned: Array<string> = []
      const { url } = yield* start(configured, {
        secureCookies: true,
        provision: (profile) =>
          Effect.sync(() => {
            provisioned.push(profile.email)
            return Subject.make({ type: "member", id: profile.idpAUserId, tenantId: profile.organizationId })
          })
      })
      const browser = Browser.jar()
      const { callback, started } = yield* logIn(url, browser)
      assert.include(Browser.setCookie(started, "idp_a-oauth-state")!, "Secure")
      assert.include(Browser.setCookie(callback, "fw:session")!, "Secure")
      const subject = yield* Session.verifySession(browser.get("fw:session")!, sessionSecret)
      assert.deepStrictEqual([subject.type, subject.id, subject.tenantId], ["member", "user_01", "org_01"])
      assert.deepStrictEqual(provisioned, ["ada@acme.test"])
    }))

  it("a session secret under 32 bytes is refused when the routes are built", () => {
    assert.throws(() => idpAHostedLoginRoutes({ sessionSecret: "short" }), Session.SessionSecretTooShort)
  })
})
