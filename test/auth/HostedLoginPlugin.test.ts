/**
 * The hosted-login plugin mounted in a real app: routes served by the app server, the exchange
 * through the plugin's HttpClient (limited to its declared provider host), the tables provisioned
 * through the plugin's Store, and the minted session accepted by the app's password-session
 * strategy over POST /rpc. Settings come from the process environment, as in production.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import { idpAHostedLoginPlugin } from "../../src/auth/HostedLogin.js"
import { passwordSessionStrategy } from "../../src/auth/Session.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import * as Browser from "./support/Browser.js"
import * as StandIn from "./support/IdpAStandIn.js"
import { unicodeVariants } from "../support/UnicodeIdentities.js"

const sessionSecret = "hosted-login-session-secret-0123456789"
const names = ["IDP_A_CLIENT_ID", "IDP_A_API_KEY", "IDP_A_REDIRECT_URI"] as const

/** Sets (or unsets) the IDP_A_* variables for the scope, restoring them afterwards. */
const environment = (values: Partial<Record<(typeof names)[number], string>>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const saved = names.map((name) => [name, process.env[name]] as const)
      for (const name of names) {
        const value = values[name]
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
      return saved
    }),
    (saved) =>
      Effect.sync(() => {
        for (const [name, value] of saved) {
          if (value === undefined) delete process.env[name]
          else process.env[name] = value
        }
      })
  )

const whoAmI = query("auth.whoAmI", {
  input: Schema.Struct({}),
  output: Schema.Struct({ id: Schema.String, tenantId: Schema.NullOr(Schema.String) }),
  handler: (_, { subject }) => Effect.succeed({ id: subject.id, tenantId: subject.tenantId })
})

/** The app: `whoAmI`, the plugin (its provider the stand-in at `apiBaseUrl`), the session strategy. */
const makeApp = (apiBaseUrl: string) =>
  defineApp({
    name: "login",
    procedures: [whoAmI],
    plugins: [idpAHostedLoginPlugin({ sessionSecret, apiBaseUrl, landingPath: "/home" })],
    auth: [passwordSessionStrategy({ secret: sessionSecret })]
  })

/** Configures the plugin (for the scope) for the stand-in's client, its callback on the app at `url`. */
const configure = (url: string) =>
  environment({
    IDP_A_CLIENT_ID: StandIn.clientId,
    IDP_A_API_KEY: StandIn.apiKey,
    IDP_A_REDIRECT_URI: `${url}/auth/idp_a/callback`
  })

/** Walks login → provider → callback at the app at `url` in a fresh cookie jar: the callback's answer, and the jar. */
const walkLogin = (url: string) =>
  Effect.gen(function*() {
    const browser = Browser.jar()
    const started = yield* Browser.get(`${url}/auth/idp_a/login`)
    browser.take(started)
    const callback = yield* Browser.get((yield* Browser.get(started.location!)).location!, browser.header())
    return { browser, callback }
  })

describe("idpAHostedLoginPlugin in an app", () => {
  it("declares store:write and its provider host", () => {
    const plugin = idpAHostedLoginPlugin({ sessionSecret })
    assert.deepStrictEqual(plugin.permissions, ["store:write", "network:outbound:api.workos.com"])
    assert.deepStrictEqual(plugin.routes?.map((route) => `${route.method} ${route.path}`), ["GET /auth/idp_a/login", "GET /auth/idp_a/callback"])
    assert.deepStrictEqual(plugin.tables?.map((table) => table.name), ["_fw_users", "_fw_organizations"])
  })

  it.scopedLive("503 until configured; then the login sets a session the app's strategy accepts, and later logins find the user", () =>
    Effect.gen(function*() {
      const standIn = yield* StandIn.start
      const app = makeApp(standIn.url)
      yield* environment({})
      const served = yield* Serve.serve(app, Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal)))
      assert.strictEqual((yield* Browser.get(`${served.url}/auth/idp_a/login`)).status, 503)
      yield* configure(served.url)
      const client = yield* Serve.httpClient(served, app)
      const logIn = Effect.gen(function*() {
        const { browser, callback } = yield* walkLogin(served.url)
        browser.take(callback)
        assert.deepStrictEqual([callback.status, callback.location], [302, "/home"])
        return yield* client.call(whoAmI, {}, { headers: { cookie: `fw:session=${browser.get("fw:session")}` } })
      })
      // A stale or forged session cookie does not lock the user out of the login routes.
      const stale = "fw:session=signed.with-an-old-secret"
      assert.strictEqual((yield* Browser.get(`${served.url}/auth/idp_a/login`, stale)).status, 302)
      assert.strictEqual((yield* Browser.get(`${served.url}/auth/idp_a/callback?code=x&state=y`, stale)).status, 400)
      const first = yield* logIn
      assert.notStrictEqual(first.id, "anonymous")
      assert.isString(first.tenantId)
      assert.deepStrictEqual(yield* logIn, first)
      // Another provider user claiming ada's address without the provider having verified it: 403.
      standIn.logInAs({ id: "user_66", email: "ADA@acme.test", firstName: "Eve", lastName: "X", organizationId: "org_66", emailVerified: false })
      const { callback: refused } = yield* walkLogin(served.url)
      assert.strictEqual(refused.status, 403)
      assert.isUndefined(Browser.setCookie(refused, "fw:session"))
      standIn.failExchanges(true)
      const { callback: failed } = yield* walkLogin(served.url)
      assert.strictEqual(failed.status, 502)
      assert.notInclude(failed.body, StandIn.apiKey)
    }))

  it.scopedLive("no normalisation merges two provider identities: Unicode-padded addresses never reach ada's account, K (Kelvin sign) is not k", () =>
    Effect.gen(function*() {
      const standIn = yield* StandIn.start
      const app = makeApp(standIn.url)
      const served = yield* Serve.serve(app, Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal)))
      yield* configure(served.url)
      const client = yield* Serve.httpClient(served, app)
      /** Logs in as the stand-in's current user: the caller id, or the callback's status when refused. */
      const logIn = Effect.gen(function*() {
        const { browser, callback } = yield* walkLogin(served.url)
        if (callback.status !== 302) return callback.status
        browser.take(callback)
        return (yield* client.call(whoAmI, {}, { headers: { cookie: `fw:session=${browser.get("fw:session")}` } })).id
      })
      const as = (id: string, email: string) =>
        standIn.logInAs({ id, email, firstName: "F", lastName: "L", organizationId: null, emailVerified: true })
      as("user_ada", "ada@acme.test")
      const ada = yield* logIn
      assert.isString(ada)
      for (const [index, email] of [...unicodeVariants.map((v) => v.replace("alice@example.test", "ada@acme.test")), "ada@acme.test\u200b"].entries()) {
        as(`user_u${index}`, email)
        const outcome = yield* logIn
        assert.notStrictEqual(outcome, ada, JSON.stringify(email))
        assert.isNumber(outcome, JSON.stringify(email))
      }
      as("user_kevin", "kevin@acme.test")
      const kevin = yield* logIn
      as("user_kelvin", "\u212Aevin@acme.test")
      const kelvin = yield* logIn
      assert.isString(kelvin)
      assert.notStrictEqual(kelvin, kevin)
    }))
})
