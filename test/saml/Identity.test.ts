/**
 * Identity values are read exactly as the IdP signed them: only XML whitespace (space, tab, CR,
 * LF) around a value is trimmed, never a Unicode space or U+FEFF, so two identities the IdP keeps
 * apart never become one account here (issue 18).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, TestClock } from "effect"
import * as Libraries from "../../src/saml/Libraries.js"
import * as LoginResponse from "../../src/saml/LoginResponse.js"
import * as Idp from "./support/Idp.js"
import * as Sp from "./support/Sp.js"
import { unicodeVariants } from "../support/UnicodeIdentities.js"

const now = Date.UTC(2026, 10, 23, 12)

const validate = (xml: string) =>
  Effect.flatMap(Libraries.load, (libraries) =>
    Effect.either(LoginResponse.validate(libraries, xml, Idp.expectations(now))))


describe("SAML identity values keep everything but XML whitespace", () => {
  it.effect("a NameID or email attribute with a Unicode space or U+FEFF at either end is read as signed", () =>
    Effect.gen(function*() {
      for (const value of unicodeVariants) {
        const nameId = yield* validate(Idp.validResponse({ now, inResponseTo: "_r", nameId: value, email: "plain@example.test" }))
        assert.strictEqual(Either.getOrThrow(nameId).profile.nameId, value, JSON.stringify(value))
        const email = yield* validate(Idp.validResponse({ now, inResponseTo: "_r", nameId: "bob", email: value }))
        assert.strictEqual(Either.getOrThrow(email).profile.email, value, JSON.stringify(value))
      }
    }))

  it.effect("XML whitespace (space, tab, CR, LF) around a value is still trimmed", () =>
    Effect.gen(function*() {
      const result = yield* validate(Idp.validResponse({ now, inResponseTo: "_r", nameId: " \t\r\n alice@example.test \n\t", email: "\nalice@example.test " }))
      const { email, nameId } = Either.getOrThrow(result).profile
      assert.deepStrictEqual([nameId, email], ["alice@example.test", "alice@example.test"])
    }))

  it.effect("an Issuer or Audience padded with a Unicode space is another entity", () =>
    Effect.gen(function*() {
      const issuer = yield* validate(Idp.validResponse({ now, inResponseTo: "_r", issuer: `${Idp.idpEntityId}\u00a0` }))
      assert.isTrue(Either.isLeft(issuer) && issuer.left.reason === "issuer", JSON.stringify(issuer))
      const audience = yield* validate(Idp.validResponse({ now, inResponseTo: "_r", audiences: [[`\ufeff${Idp.spEntityId}`]] }))
      assert.isTrue(Either.isLeft(audience) && audience.left.reason === "audience", JSON.stringify(audience))
    }))

  it.effect("U+0085, U+2028 and U+2029 (which the XML parser would rewrite as a line feed, then trimmed) are refused", () =>
    Effect.gen(function*() {
      for (const end of ["\u0085", "\u2028", "\u2029"]) {
        // Signed over a line feed, delivered with the character the parser turns into one.
        const signed = Idp.validResponse({ now, inResponseTo: "_r", nameId: "alice@example.test\n", email: "x@example.test" })
        const result = yield* validate(signed.replace("alice@example.test\n</saml:NameID>", `alice@example.test${end}</saml:NameID>`))
        assert.isTrue(Either.isLeft(result) && result.left.reason === "malformed", JSON.stringify(result))
      }
    }))

  it.scoped("over /saml/acs, a signed NameID alice@example.test + U+00A0 does not log in as alice@example.test", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(now)
      const sp = yield* Sp.serve(Sp.memory)
      const request = yield* Sp.startLogin(sp.served.url)
      const value = "alice@example.test\u00a0"
      const answer = yield* Sp.postToAcs(sp.served.url, Idp.validResponse({ now, inResponseTo: request.id, nameId: value }), request)
      assert.strictEqual(answer.status, 302, answer.body)
      const browser = Sp.Browser.jar()
      browser.take(answer)
      const caller = yield* sp.client.call(Sp.whoAmI, {}, { headers: { cookie: browser.header() } })
      assert.strictEqual(caller.id, value)
      assert.notStrictEqual(caller.id, "alice@example.test")
    }))
})
