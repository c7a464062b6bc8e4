/**
 * Single logout (spec 3.4, 4.4, 5.3.4) over real sockets: the SP-initiated round trip
 * (`/saml/logout` → IdP → LogoutResponse at `/saml/slo`), IdP-initiated LogoutRequests by the
 * redirect binding (signature over the raw query) and by POST (enveloped signature), and the
 * refusals: unsigned or badly signed messages get 401 and the session survives.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createVerify } from "node:crypto"
import { inflateRawSync } from "node:zlib"
import * as Pg from "../support/Pg.js"
import * as Idp from "./support/Idp.js"
import * as Sp from "./support/Sp.js"

const at = Date.UTC(2026, 10, 23, 12)

/** What a browser sends with a click on this site's own logout link. */
const sameSite = { "sec-fetch-site": "same-origin" }

/** Serves an SP and logs alice in; returns the SP and her cookie jar. */
const loggedIn = (overrides: Parameters<typeof Sp.serve>[1] = {}, storeLayer: Parameters<typeof Sp.serve>[0] = Sp.memory) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(at)
    const sp = yield* Sp.serve(storeLayer, { privateKey: Idp.spKeys.key, logoutRedirect: "/bye", ...overrides })
    const request = yield* Sp.startLogin(sp.served.url)
    const browser = Sp.Browser.jar()
    browser.take(yield* Sp.postToAcs(sp.served.url, Idp.validResponse({ now: at, inResponseTo: request.id }), request))
    assert.strictEqual((yield* whoAmI(sp, browser)).id, "alice@example.test")
    return { sp, browser }
  })

const whoAmI = (sp: Effect.Effect.Success<ReturnType<typeof Sp.serve>>, browser: ReturnType<typeof Sp.Browser.jar>) =>
  sp.client.call(Sp.whoAmI, {}, { headers: { cookie: browser.header() } })

/** The message a redirect-binding URL carries, and whether its signature verifies with `cert`. */
const carried = (location: string, cert: string) => {
  const query = location.slice(location.indexOf("?") + 1)
  const [signed, signature] = query.split("&Signature=")
  const parameter = new URL(location).searchParams
  const message = parameter.get("SAMLRequest") ?? parameter.get("SAMLResponse")!
  return {
    xml: inflateRawSync(Buffer.from(message, "base64")).toString("utf8"),
    verifies: signature !== undefined &&
      createVerify("sha256").update(signed!).verify(cert, Buffer.from(decodeURIComponent(signature), "base64"))
  }
}

describe("SAML single logout", () => {
  it.scoped("GET /saml/logout from another site (or with no sign of its origin) ends nothing: it answers a page that posts back", () =>
    Effect.gen(function*() {
      const { browser, sp } = yield* loggedIn()
      for (const headers of [{ "sec-fetch-site": "cross-site" }, {}, { referer: "https://evil.test/page" }]) {
        const page = yield* Sp.Browser.get(`${sp.served.url}/saml/logout`, browser.header(), headers)
        assert.strictEqual(page.status, 200, JSON.stringify(headers))
        assert.deepStrictEqual(page.setCookies, [])
        assert.include(page.body, `<form method="post" action="/saml/logout">`)
        assert.notInclude(page.body, "<script")
        assert.strictEqual((yield* whoAmI(sp, browser)).id, "alice@example.test")
      }
      // A cross-site form post is refused; the page's own post (from this origin) logs out.
      const forged = yield* Sp.postForm(`${sp.served.url}/saml/logout`, {}, browser.header(), { origin: "https://evil.test" })
      assert.strictEqual(forged.status, 403)
      assert.strictEqual((yield* whoAmI(sp, browser)).id, "alice@example.test")
      const posted = yield* Sp.postForm(`${sp.served.url}/saml/logout`, {}, browser.header(), { origin: sp.served.url })
      browser.take(posted)
      assert.strictEqual(posted.status, 302)
      assert.isTrue(posted.location!.startsWith(`${Idp.idpSloUrl}?SAMLRequest=`))
      assert.strictEqual((yield* whoAmI(sp, browser)).id, "anonymous")
    }))

  it.scoped("GET /saml/logout ends the session when same-site: Sec-Fetch-Site same-site or none, or a Referer on this host", () =>
    Effect.gen(function*() {
      for (const headers of [{ "sec-fetch-site": "same-site" }, { "sec-fetch-site": "none" }, { referer: "SELF/account" }]) {
        const { browser, sp } = yield* loggedIn()
        const resolved = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v.replace("SELF", sp.served.url)]))
        const logout = yield* Sp.Browser.get(`${sp.served.url}/saml/logout`, browser.header(), resolved)
        browser.take(logout)
        assert.strictEqual(logout.status, 302, JSON.stringify(headers))
        assert.strictEqual((yield* whoAmI(sp, browser)).id, "anonymous")
      }
    }))

  it.scoped("SP-initiated: /saml/logout clears the session and sends a signed LogoutRequest; the IdP's LogoutResponse completes it once", () =>
    Effect.gen(function*() {
      const { browser, sp } = yield* loggedIn()
      const logout = yield* Sp.Browser.get(`${sp.served.url}/saml/logout`, browser.header(), sameSite)
      browser.take(logout)
      assert.strictEqual(logout.status, 302)
      assert.isTrue(logout.location!.startsWith(`${Idp.idpSloUrl}?SAMLRequest=`))
      const request = carried(logout.location!, Idp.spKeys.cert)
      assert.isTrue(request.verifies)
      assert.include(request.xml, "<saml:NameID Format=\"urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress\">alice@example.test</saml:NameID>")
      assert.include(request.xml, "<samlp:SessionIndex>_session1</samlp:SessionIndex>")
      assert.strictEqual((yield* whoAmI(sp, browser)).id, "anonymous")

      const id = /ID="([^"]+)"/.exec(request.xml)![1]!
      const response = Idp.redirectQuery("SAMLResponse", Idp.logoutResponseXml({ inResponseTo: id, now: at }), {})
      const done = yield* Sp.Browser.get(`${sp.served.url}/saml/slo?${response}`, browser.header())
      assert.deepStrictEqual([done.status, done.location], [302, "/bye"])
      const again = yield* Sp.Browser.get(`${sp.served.url}/saml/slo?${response}`)
      assert.strictEqual(again.status, 401)
    }))

  it.scoped("IdP-initiated by redirect: a signed LogoutRequest ends the session and is answered with a signed LogoutResponse", () =>
    Effect.gen(function*() {
      const { browser, sp } = yield* loggedIn()
      const query = Idp.redirectLogoutRequest({ id: "_idp_logout1", nameId: "alice@example.test", now: at, relayState: "state 1+2" })
      const answer = yield* Sp.Browser.get(`${sp.served.url}/saml/slo?${query}`, browser.header())
      browser.take(answer)
      assert.strictEqual(answer.status, 302)
      const response = carried(answer.location!, Idp.spKeys.cert)
      assert.isTrue(response.verifies)
      assert.include(response.xml, `InResponseTo="_idp_logout1"`)
      assert.include(response.xml, "urn:oasis:names:tc:SAML:2.0:status:Success")
      assert.strictEqual(new URL(answer.location!).searchParams.get("RelayState"), "state 1+2")
      assert.strictEqual((yield* whoAmI(sp, browser)).id, "anonymous")
      // The same LogoutRequest again is a replay.
      assert.strictEqual((yield* Sp.Browser.get(`${sp.served.url}/saml/slo?${query}`)).status, 401)
    }))

  it.scoped("by redirect: unsigned, signed by another key, or re-encoded: 401 and the session survives", () =>
    Effect.gen(function*() {
      const { browser, sp } = yield* loggedIn()
      const request = (id: string, options: Partial<Parameters<typeof Idp.redirectLogoutRequest>[0]>) =>
        Idp.redirectLogoutRequest({ id, nameId: "alice@example.test", now: at, ...options })
      // The same characters percent-encoded differently: the signature covers the octets as sent.
      const reencoded = request("_re", {}).replace("SigAlg=http%3A", "SigAlg=http:")
      for (const query of [request("_unsigned", { signed: false }), request("_evil", { keys: Idp.evilKeys }), reencoded]) {
        const answer = yield* Sp.Browser.get(`${sp.served.url}/saml/slo?${query}`, browser.header())
        assert.strictEqual(answer.status, 401, answer.body)
        assert.deepStrictEqual(answer.setCookies, [])
      }
      assert.strictEqual((yield* whoAmI(sp, browser)).id, "alice@example.test")
    }))

  it.scoped("by POST: a signed LogoutRequest ends the session; unsigned or badly signed is 401 and the session survives", () =>
    Effect.gen(function*() {
      const { browser, sp } = yield* loggedIn()
      const post = (xml: string) => Sp.postForm(`${sp.served.url}/saml/slo`, { SAMLRequest: Buffer.from(xml).toString("base64") }, browser.header())
      for (const xml of [
        Idp.postedLogoutRequest({ id: "_p1", nameId: "alice@example.test", now: at, signed: false }),
        Idp.postedLogoutRequest({ id: "_p2", nameId: "alice@example.test", now: at, keys: Idp.evilKeys })
      ]) {
        const answer = yield* post(xml)
        assert.strictEqual(answer.status, 401, answer.body)
        assert.deepStrictEqual(answer.setCookies, [])
      }
      assert.strictEqual((yield* whoAmI(sp, browser)).id, "alice@example.test")
      const answer = yield* post(Idp.postedLogoutRequest({ id: "_p3", nameId: "alice@example.test", now: at }))
      browser.take(answer)
      assert.strictEqual(answer.status, 302)
      assert.strictEqual((yield* whoAmI(sp, browser)).id, "anonymous")
    }))

  it.scoped("a LogoutRequest for another NameID leaves this browser's session alone", () =>
    Effect.gen(function*() {
      const { browser, sp } = yield* loggedIn()
      const query = Idp.redirectLogoutRequest({ id: "_other", nameId: "bob@example.test", now: at })
      const answer = yield* Sp.Browser.get(`${sp.served.url}/saml/slo?${query}`, browser.header())
      browser.take(answer)
      assert.strictEqual(answer.status, 302)
      assert.strictEqual((yield* whoAmI(sp, browser)).id, "alice@example.test")
    }))

  it.scoped("an IdP LogoutRequest older than the replay window, or without a Destination, is refused; another session index leaves the session", () =>
    Effect.gen(function*() {
      const { browser, sp } = yield* loggedIn()
      const slo = (query: string) => Sp.Browser.get(`${sp.served.url}/saml/slo?${query}`, browser.header())
      const old = Idp.redirectLogoutRequest({ id: "_old", nameId: "alice@example.test", now: at - 11 * 60_000 })
      assert.strictEqual(JSON.parse((yield* slo(old)).body).reason, "expired")
      const xml = `<samlp:LogoutRequest xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion"` +
        ` ID="_nodest" Version="2.0" IssueInstant="${new Date(at).toISOString()}"><saml:Issuer>${Idp.idpEntityId}</saml:Issuer>` +
        `<saml:NameID>alice@example.test</saml:NameID></samlp:LogoutRequest>`
      assert.strictEqual(JSON.parse((yield* slo(Idp.redirectQuery("SAMLRequest", xml, {}))).body).reason, "destination")
      const otherSession = Idp.redirectQuery(
        "SAMLRequest",
        Idp.logoutRequestXml({ id: "_other_session", nameId: "alice@example.test", now: at, sessionIndex: "_another" }),
        {}
      )
      const answer = yield* slo(otherSession)
      browser.take(answer)
      assert.strictEqual(answer.status, 302)
      assert.strictEqual((yield* whoAmI(sp, browser)).id, "alice@example.test")
    }))

  if (Pg.serverUrl === null) {
    it("sloStore shared across replicas: skipped", () => console.warn(Pg.skipReason))
  } else {
    it.scoped("sloStore: {store: true}: a logout started on one replica completes on the other, once", () =>
      Effect.gen(function*() {
        const url = yield* Pg.freshDatabase
        const options = { sloStore: { store: true } } as const
        const { browser, sp } = yield* loggedIn(options, Sp.sql(Pg.layerClient(url)))
        const other = yield* Sp.serve(Sp.sql(Pg.layerClient(url)), { ...options, logoutRedirect: "/bye" })
        const logout = yield* Sp.Browser.get(`${sp.served.url}/saml/logout`, browser.header(), sameSite)
        const id = /ID="([^"]+)"/.exec(carried(logout.location!, Idp.spKeys.cert).xml)![1]!
        const response = Idp.redirectQuery("SAMLResponse", Idp.logoutResponseXml({ inResponseTo: id, now: at }), {})
        assert.strictEqual((yield* Sp.Browser.get(`${other.served.url}/saml/slo?${response}`)).status, 302)
        assert.strictEqual((yield* Sp.Browser.get(`${sp.served.url}/saml/slo?${response}`)).status, 401)
      }))
  }
})
