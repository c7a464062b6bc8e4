/**
 * SAML login end to end over real sockets: `/saml/login` issues an AuthnRequest, a response
 * signed by an independent library (xml-crypto, or samlify acting as the IdP) answers it at
 * `/saml/acs`, and the session cookie it sets authenticates a procedure call over POST /rpc.
 * On the memory tier and on SQLite; encrypted assertions too.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createVerify } from "node:crypto"
import { defineApp } from "../../src/app/App.js"
import { samlSsoPlugin } from "../../src/saml/SamlSsoPlugin.js"
import * as Serve from "../support/Serve.js"
import * as Idp from "./support/Idp.js"
import * as Sp from "./support/Sp.js"

const memory = Sp.memory

/** Logs in with `respond` building the IdP's answer to the AuthnRequest; returns the ACS answer and the caller it authenticates. */
const logIn = (
  served: Effect.Effect.Success<ReturnType<typeof Sp.serve>>,
  respond: (request: { readonly id: string; readonly now: number }) => Effect.Effect<string> | string,
  returnTo?: string
) =>
  Effect.gen(function*() {
    const request = yield* Sp.startLogin(served.served.url, returnTo)
    const now = Date.now()
    const built = respond({ id: request.id, now })
    const xml = typeof built === "string" ? built : yield* built
    const answer = yield* Sp.postToAcs(served.served.url, xml, request)
    const browser = Sp.Browser.jar()
    browser.take(answer)
    const caller = yield* served.client.call(Sp.whoAmI, {}, { headers: { cookie: browser.header() } })
    return { answer, caller, browser }
  })

describe("SAML login", () => {
  it.scoped("metadata describes the SP: entity id, ACS, SLO, signing cert, AuthnRequestsSigned only with a privateKey", () =>
    Effect.gen(function*() {
      const plain = yield* Sp.serve(memory)
      const unsigned = yield* Effect.promise(() => fetch(`${plain.served.url}/saml/metadata`).then((r) => r.text()))
      assert.include(unsigned, `entityID="${Idp.spEntityId}"`)
      assert.include(unsigned, `Location="${Idp.acsUrl}"`)
      assert.include(unsigned, `Location="${Idp.sloUrl}"`)
      assert.include(unsigned, `AuthnRequestsSigned="false"`)
      assert.notInclude(unsigned, "X509Certificate")
      const signing = yield* Sp.serve(memory, { privateKey: Idp.spKeys.key, signingCert: Idp.spKeys.cert })
      const signed = yield* Effect.promise(() => fetch(`${signing.served.url}/saml/metadata`).then((r) => r.text()))
      assert.include(signed, `AuthnRequestsSigned="true"`)
      assert.include(signed, Idp.spKeys.cert.split("\n")[1]!)
    }))

  it.scoped("an xml-crypto signed assertion logs in (memory tier); the session cookie is HttpOnly and works over POST /rpc", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const sp = yield* Sp.serve(memory)
      const { answer, caller } = yield* logIn(sp, ({ id, now }) => Idp.validResponse({ now, inResponseTo: id }), "/dashboard?tab=1")
      assert.strictEqual(answer.status, 302)
      assert.strictEqual(answer.location, "/dashboard?tab=1")
      const session = Sp.Browser.setCookie(answer, "fw:session")!
      assert.match(session, /HttpOnly/)
      assert.match(Sp.Browser.setCookie(answer, "fw_saml")!, /HttpOnly/)
      assert.deepStrictEqual(caller, { type: "user", id: "alice@example.test", tenantId: "acme" })
    }))

  it.scoped("samlify acting as the IdP (assertion and envelope signed) logs in, with wantAuthnResponseSigned", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      // samlify stamps NotBefore with its own wall clock, a moment after the TestClock's.
      const sp = yield* Sp.serve(memory, { wantAuthnResponseSigned: true, successRedirect: "/home", acceptedClockSkewMs: 60_000 })
      const metadata = yield* Effect.promise(() => fetch(`${sp.served.url}/saml/metadata`).then((r) => r.text()))
      const { answer, caller } = yield* logIn(sp, ({ id }) =>
        Effect.promise(() => Idp.samlifyResponse({ spMetadata: metadata, inResponseTo: id, email: "bob@example.test" })))
      assert.strictEqual(answer.location, "/home", answer.body)
      assert.strictEqual(caller.id, "bob@example.test")
    }))

  it.scoped("an encrypted assertion (AES-256-GCM, RSA-OAEP) logs in on SQLite", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const sp = yield* Sp.serve(Sp.sqlite())
      const { caller } = yield* logIn(sp, ({ id, now }) =>
        Effect.promise(() => Idp.encryptAssertion(Idp.validResponse({ now, inResponseTo: id }))))
      assert.strictEqual(caller.id, "alice@example.test")
    }))

  it.scoped("an AES-CBC encrypted assertion is decrypted only under a valid envelope signature (which covers the ciphertext)", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const sp = yield* Sp.serve(memory)
      const cbc = (request: { readonly id: string; readonly now: number }) =>
        Idp.encryptAssertion(Idp.validResponse({ now: request.now, inResponseTo: request.id }), "cbc")
      const { caller } = yield* logIn(sp, (request) => Effect.promise(async () => Idp.signResponse(await cbc(request))))
      assert.strictEqual(caller.id, "alice@example.test")
      const request = yield* Sp.startLogin(sp.served.url)
      const forged = yield* Effect.promise(async () => Idp.signResponse(await cbc({ id: request.id, now: Date.now() }), { keys: Idp.evilKeys }))
      const answer = yield* Sp.postToAcs(sp.served.url, forged, request)
      assert.deepStrictEqual([answer.status, JSON.parse(answer.body).reason], [401, "decryption"])
    }))

  it.scoped("the IdP's EC key and a rotated certificate list both verify", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const sp = yield* Sp.serve(memory, {
        idp: { ...Sp.baseOptions.idp, idpCert: [Idp.idpKeys.cert, Idp.rotatedIdpKeys.cert] }
      })
      const { caller } = yield* logIn(sp, ({ id, now }) =>
        Idp.signAssertion(Idp.responseXml({ now, inResponseTo: id }, Idp.assertionXml({ now, inResponseTo: id })), { keys: Idp.rotatedIdpKeys }))
      assert.strictEqual(caller.id, "alice@example.test")
    }))

  it.scoped("SessionNotOnOrAfter caps the fw:session: the cookie and the session it carries end when the IdP's session does", () =>
    Effect.gen(function*() {
      const now = Date.UTC(2026, 10, 23, 12)
      yield* TestClock.setTime(now)
      const sp = yield* Sp.serve(memory)
      const { answer, browser, caller } = yield* logIn(sp, ({ id }) => Idp.validResponse({ now, inResponseTo: id, sessionNotOnOrAfter: now + 3_600_000 }))
      assert.strictEqual(caller.id, "alice@example.test")
      assert.match(Sp.Browser.setCookie(answer, "fw:session")!, /Max-Age=3600;/)
      assert.match(Sp.Browser.setCookie(answer, "fw_saml")!, /Max-Age=3600;/)
      // A client that keeps the cookie past Max-Age still finds the session expired.
      yield* TestClock.adjust("3601 seconds")
      const late = yield* Effect.either(sp.client.call(Sp.whoAmI, {}, { headers: { cookie: browser.header() } }))
      assert.isTrue(late._tag === "Left", JSON.stringify(late))
      // Without SessionNotOnOrAfter the default lifetime stands; a later one does not extend it.
      const at = now + 3_601_000
      const plain = yield* logIn(sp, ({ id }) => Idp.validResponse({ now: at, inResponseTo: id, assertionId: "_plain" }))
      assert.match(Sp.Browser.setCookie(plain.answer, "fw:session")!, /Max-Age=604800;/)
      const long = yield* logIn(sp, ({ id }) => Idp.validResponse({ now: at, inResponseTo: id, assertionId: "_long", sessionNotOnOrAfter: at + 30 * 86_400_000 }))
      assert.match(Sp.Browser.setCookie(long.answer, "fw:session")!, /Max-Age=604800;/)
    }))

  it.scoped("an assertion whose SessionNotOnOrAfter has passed is refused", () =>
    Effect.gen(function*() {
      const now = Date.UTC(2026, 10, 23, 12)
      yield* TestClock.setTime(now)
      const sp = yield* Sp.serve(memory)
      const request = yield* Sp.startLogin(sp.served.url)
      const answer = yield* Sp.postToAcs(sp.served.url, Idp.validResponse({ now, inResponseTo: request.id, sessionNotOnOrAfter: now - 1_000 }), request)
      assert.deepStrictEqual([answer.status, JSON.parse(answer.body).reason], [401, "expired"])
      assert.isUndefined(Sp.Browser.setCookie(answer, "fw:session"))
    }))

  it.scoped("a stale or forged session cookie does not lock the browser out of login", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const sp = yield* Sp.serve(memory)
      const stale = "fw:session=signed.with-an-old-secret"
      assert.strictEqual((yield* Sp.Browser.get(`${sp.served.url}/saml/login`, stale)).status, 302)
      const request = yield* Sp.startLogin(sp.served.url)
      const answer = yield* Sp.postToAcs(sp.served.url, Idp.validResponse({ now: Date.now(), inResponseTo: request.id }), {
        cookie: `${request.cookie}; ${stale}`
      })
      assert.strictEqual(answer.status, 302, answer.body)
    }))

  it.scoped("returnTo must be a local path", () =>
    Effect.gen(function*() {
      const sp = yield* Sp.serve(memory)
      for (const returnTo of ["https://evil.test/", "//evil.test/x", "/\\evil.test", "javascript:alert(1)", "/\u0100", "/a\u007f", "/\u2028x"]) {
        const answer = yield* Sp.Browser.get(`${sp.served.url}/saml/login?returnTo=${encodeURIComponent(returnTo)}`)
        assert.strictEqual(answer.status, 400, returnTo)
      }
    }))
})

describe("SAML signature and time options", () => {
  const post = (overrides: Parameters<typeof Sp.serve>[1], build: (request: { readonly id: string; readonly now: number }) => string | Promise<string>) =>
    Effect.gen(function*() {
      const now = Date.UTC(2026, 10, 23, 12)
      yield* TestClock.setTime(now)
      const sp = yield* Sp.serve(memory, overrides)
      const request = yield* Sp.startLogin(sp.served.url)
      const xml = yield* Effect.promise(async () => build({ id: request.id, now }))
      const answer = yield* Sp.postToAcs(sp.served.url, xml, request)
      return answer.status === 302 ? "accepted" : JSON.parse(answer.body).reason as string
    })
  const signedTwice = (request: { readonly id: string; readonly now: number }, envelopeKeys: Idp.KeyPair) =>
    Idp.signResponse(Idp.validResponse({ now: request.now, inResponseTo: request.id }), { keys: envelopeKeys })

  it.scoped("wantAuthnResponseSigned requires a valid envelope signature; at the default a failing one is discarded", () =>
    Effect.gen(function*() {
      const assertionOnly = (request: { readonly id: string; readonly now: number }) => Idp.validResponse({ now: request.now, inResponseTo: request.id })
      assert.strictEqual(yield* post({ wantAuthnResponseSigned: true }, assertionOnly), "signature_missing")
      assert.strictEqual(yield* post({ wantAuthnResponseSigned: true }, (r) => signedTwice(r, Idp.evilKeys)), "signature")
      assert.strictEqual(yield* post({ wantAuthnResponseSigned: true }, (r) => signedTwice(r, Idp.idpKeys)), "accepted")
      assert.strictEqual(yield* post({}, (r) => signedTwice(r, Idp.evilKeys)), "accepted")
    }))

  it.scoped("an encrypted assertion without decryptionPvk is refused", () =>
    Effect.gen(function*() {
      const { decryptionPvk: _, ...withoutKey } = Sp.baseOptions
      const reason = yield* Effect.gen(function*() {
        yield* TestClock.setTime(Date.UTC(2026, 10, 23, 12))
        const sp = yield* Serve.serve(defineApp({ plugins: [samlSsoPlugin(withoutKey)] }), memory)
        const request = yield* Sp.startLogin(sp.url)
        const xml = yield* Effect.promise(() => Idp.encryptAssertion(Idp.validResponse({ now: Date.UTC(2026, 10, 23, 12), inResponseTo: request.id })))
        return JSON.parse((yield* Sp.postToAcs(sp.url, xml, request)).body).reason
      })
      assert.strictEqual(reason, "encrypted")
    }))

  it.scoped("acceptedClockSkewMs widens NotBefore and NotOnOrAfter on both sides", () =>
    Effect.gen(function*() {
      const skew = { acceptedClockSkewMs: 60_000 }
      const at = (shift: Partial<Idp.ResponseFields>) => (r: { readonly id: string; readonly now: number }) =>
        Idp.validResponse({ now: r.now, inResponseTo: r.id, ...shift })
      assert.strictEqual(yield* post(skew, (r) => at({ notOnOrAfter: r.now - 30_000, confirmationNotOnOrAfter: r.now - 30_000 })(r)), "accepted")
      assert.strictEqual(yield* post(skew, (r) => at({ notOnOrAfter: r.now - 90_000 })(r)), "expired")
      assert.strictEqual(yield* post(skew, (r) => at({ notBefore: r.now + 30_000 })(r)), "accepted")
      assert.strictEqual(yield* post(skew, (r) => at({ notBefore: r.now + 90_000 })(r)), "not_yet_valid")
      assert.strictEqual(yield* post({}, (r) => at({ notBefore: r.now + 30_000 })(r)), "not_yet_valid")
    }))

  it.scoped("the AuthnRequest is signed over the raw query iff privateKey is set", () =>
    Effect.gen(function*() {
      const signing = yield* Sp.serve(memory, { privateKey: Idp.spKeys.key })
      const signed = yield* Sp.startLogin(signing.served.url, "/after")
      const raw = signed.location.search.slice(1)
      const [octets, signature] = raw.split("&Signature=")
      assert.isTrue(createVerify("sha256").update(octets!).verify(Idp.spKeys.cert, Buffer.from(decodeURIComponent(signature!), "base64")))
      assert.match(octets!, /^SAMLRequest=[^&]+&RelayState=%2Fafter&SigAlg=/)
      assert.include(signed.xml, `AssertionConsumerServiceURL="${Idp.acsUrl}"`)
      const plain = yield* Sp.serve(memory)
      const unsigned = yield* Sp.startLogin(plain.served.url)
      assert.isNull(unsigned.location.searchParams.get("Signature"))
      assert.isNull(unsigned.location.searchParams.get("SigAlg"))
    }))
})
