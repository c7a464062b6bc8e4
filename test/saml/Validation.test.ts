/**
 * `LoginResponse.validate` on its own, for what a login round trip cannot show directly: what the
 * profile is read as (attributes, email), strict dates, and the envelope signature's role at the
 * default.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Keys from "../../src/saml/Keys.js"
import * as Libraries from "../../src/saml/Libraries.js"
import * as LoginResponse from "../../src/saml/LoginResponse.js"
import * as Idp from "./support/Idp.js"

const now = Date.UTC(2026, 10, 23, 12)

const validate = (xml: string, wantAuthnResponseSigned = false) =>
  Effect.flatMap(Libraries.load, (libraries) =>
    Effect.either(LoginResponse.validate(libraries, xml, Idp.expectations(now, { wantAuthnResponseSigned }))))

/** A signed response whose assertion is changed by `edit` before signing. */
const signedWith = (edit: (assertion: string) => string) =>
  Idp.signAssertion(Idp.responseXml({ now, inResponseTo: "_r" }, edit(Idp.assertionXml({ now, inResponseTo: "_r" }))))

const attribute = (name: string, value: string) =>
  `<saml:Attribute Name="${name}"><saml:AttributeValue>${value}</saml:AttributeValue></saml:Attribute>`

describe("SAML response validation", () => {
  it.effect("attributes named like Object members are plain names; values holding elements are left out", () =>
    Effect.gen(function*() {
      const xml = signedWith((assertion) =>
        assertion.replace(
          "</saml:AttributeStatement>",
          attribute("constructor", "c") + attribute("__proto__", "p") +
            `<saml:Attribute Name="targetedId"><saml:AttributeValue><saml:NameID>opaque</saml:NameID></saml:AttributeValue>` +
            `<saml:AttributeValue>kept</saml:AttributeValue></saml:Attribute></saml:AttributeStatement>`
        ))
      const result = yield* validate(xml)
      assert.isTrue(Either.isRight(result), JSON.stringify(result))
      const { attributes } = Either.getOrThrow(result).profile
      assert.deepStrictEqual([attributes["constructor"], attributes["__proto__"], attributes["targetedId"]], [["c"], ["p"], ["kept"]])
    }))

  it.effect("a real IdP's large group attribute (4,100 values, about 200 KB) fits under the work bound", () =>
    Effect.gen(function*() {
      const values = Array.from({ length: 4_100 }, (_, i) => `<saml:AttributeValue>g${String(i).padStart(4, "0")}</saml:AttributeValue>`)
      const xml = signedWith((assertion) =>
        assertion.replace("</saml:AttributeStatement>", `<saml:Attribute Name="groups">${values.join("")}</saml:Attribute></saml:AttributeStatement>`))
      assert.isTrue(Buffer.byteLength(xml) > 190_000 && Buffer.byteLength(xml) < 256 * 1024, `${Buffer.byteLength(xml)} bytes`)
      const result = yield* validate(xml)
      assert.isTrue(Either.isRight(result), JSON.stringify(Either.isLeft(result) ? result.left : null))
      const groups = Either.getOrThrow(result).profile.attributes["groups"]!
      assert.deepStrictEqual([groups.length, groups[0], groups[4_099]], [4_100, "g0000", "g4099"])
    }))

  it.effect("an ECDSA-SHA256 signed assertion verifies with the IdP's EC certificate (the SignedInfo check runs first for EC keys too)", () =>
    Effect.gen(function*() {
      const fields = { now, inResponseTo: "_r" }
      const xml = Idp.signAssertion(Idp.responseXml(fields, Idp.assertionXml(fields)), { keys: Idp.ecIdpKeys, ecdsa: true })
      const withKeys = (keys: ReadonlyArray<Keys.TrustedKey>) =>
        Effect.flatMap(Libraries.load, (libraries) =>
          Effect.either(LoginResponse.validate(libraries, xml, {
            idpEntityId: Idp.idpEntityId,
            spEntityId: Idp.spEntityId,
            acsUrl: Idp.acsUrl,
            keys,
            decryptionKey: undefined,
            wantAuthnResponseSigned: false,
            clockSkewMs: 0,
            now
          })))
      const accepted = yield* withKeys([Keys.trust(Idp.idpKeys.cert), Keys.trust(Idp.ecIdpKeys.cert)])
      assert.isTrue(Either.isRight(accepted), JSON.stringify(Either.isLeft(accepted) ? accepted.left : null))
      const tampered = yield* Effect.flatMap(Libraries.load, (libraries) =>
        Effect.either(LoginResponse.validate(libraries, xml.replace("alice@example.test</saml:NameID>", "mallory@example.test</saml:NameID>"), {
          idpEntityId: Idp.idpEntityId,
          spEntityId: Idp.spEntityId,
          acsUrl: Idp.acsUrl,
          keys: [Keys.trust(Idp.ecIdpKeys.cert)],
          decryptionKey: undefined,
          wantAuthnResponseSigned: false,
          clockSkewMs: 0,
          now
        })))
      assert.isTrue(Either.isLeft(tampered) && tampered.left.reason === "signature", JSON.stringify(tampered))
      const rsaOnly = yield* withKeys([Keys.trust(Idp.idpKeys.cert)])
      assert.isTrue(Either.isLeft(rsaOnly) && rsaOnly.left.reason === "signature")
    }))

  it.effect("email comes from an email attribute, else from a NameID whose format is emailAddress only", () =>
    Effect.gen(function*() {
      const withoutEmail = (format: string) =>
        signedWith((assertion) =>
          assertion
            .replace(/<saml:AttributeStatement>.*<\/saml:AttributeStatement>/, "")
            .replace("urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress", format))
      const unspecified = yield* validate(withoutEmail("urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified"))
      assert.isNull(Either.getOrThrow(unspecified).profile.email)
      const address = yield* validate(withoutEmail("urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"))
      assert.strictEqual(Either.getOrThrow(address).profile.email, "alice@example.test")
    }))

  it.effect("times must be xs:dateTime with a zone", () =>
    Effect.gen(function*() {
      for (const value of ["2030", "Nov 23 2030", "2030-11-23T12:00:00"]) {
        const xml = signedWith((assertion) => assertion.replace(/(<saml:Conditions NotBefore="[^"]+" NotOnOrAfter=")[^"]+"/, `$1${value}"`))
        const result = yield* validate(xml)
        assert.isTrue(Either.isLeft(result) && result.left.reason === "malformed", `${value}: ${JSON.stringify(result)}`)
      }
    }))

  it.effect("at the default the envelope signature is not consulted; wantAuthnResponseSigned requires it", () =>
    Effect.gen(function*() {
      const badEnvelope = Idp.signResponse(Idp.validResponse({ now, inResponseTo: "_r" }), { keys: Idp.evilKeys })
      assert.isTrue(Either.isRight(yield* validate(badEnvelope)))
      const refused = yield* validate(badEnvelope, true)
      assert.isTrue(Either.isLeft(refused) && refused.left.reason === "signature")
    }))
})
