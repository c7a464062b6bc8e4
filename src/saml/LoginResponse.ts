/**
 * Validation of a `samlp:Response` posted to the ACS (spec 5.3; DESIGN, "SAML"), in this order:
 * strict parse; Response and Status; the envelope signature (only with `wantAuthnResponseSigned`;
 * at the default it is not consulted, so a failing one is discarded); decryption; exactly one
 * Assertion, a direct child of the Response; its signature, always required; then, reading only
 * from that verified node: Issuer, Destination, bearer SubjectConfirmation (Recipient,
 * NotOnOrAfter, InResponseTo, no NotBefore), Conditions with skew, and every AudienceRestriction.
 * The one-time checks (InResponseTo consumed, assertion ID not seen before) belong to the caller,
 * which owns the stores.
 */
import { Effect, Either } from "effect"
import type { KeyObject } from "node:crypto"
import * as Decrypt from "./Decrypt.js"
import { reject, type SamlRejected } from "./Errors.js"
import type * as Keys from "./Keys.js"
import type * as Libraries from "./Libraries.js"
import * as Signature from "./Signature.js"
import * as Xml from "./Xml.js"

/** The identity a valid assertion carries (what `onLogin` receives). */
export interface Profile {
  readonly nameId: string
  readonly nameIdFormat: string | null
  readonly sessionIndex: string | null
  /** From an email attribute, else the NameID when its format is `emailAddress`; null when neither. */
  readonly email: string | null
  /** The IdP entity id. */
  readonly issuer: string
  readonly attributes: Readonly<Record<string, ReadonlyArray<string>>>
}

/** What the response is checked against. */
export interface Expectations {
  readonly idpEntityId: string
  readonly spEntityId: string
  readonly acsUrl: string
  readonly keys: ReadonlyArray<Keys.TrustedKey>
  readonly decryptionKey: KeyObject | undefined
  readonly wantAuthnResponseSigned: boolean
  readonly clockSkewMs: number
  /** Epoch milliseconds. */
  readonly now: number
}

/** A response that passed every stateless check. */
export interface Validated {
  readonly profile: Profile
  /** The AuthnRequest it answers; undefined for an unsolicited (IdP-initiated) response. */
  readonly inResponseTo: string | undefined
  readonly assertionId: string
  /** When the assertion stops being usable: how long its ID must be remembered. */
  readonly expiresAt: number
  /**
   * The earliest `SessionNotOnOrAfter` of its AuthnStatements (epoch milliseconds): the IdP's
   * bound on the session it grants, which the SP session must not outlive. Undefined when absent.
   */
  readonly sessionNotOnOrAfter: number | undefined
}

const success = "urn:oasis:names:tc:SAML:2.0:status:Success"
const bearer = "urn:oasis:names:tc:SAML:2.0:cm:bearer"
const emailFormat = "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"

const emailAttributes = [
  "email",
  "mail",
  "emailaddress",
  "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
  "urn:oid:0.9.2342.19200300.100.1.3"
]

/**
 * The attributes, by name. A value holding elements (an `eduPersonTargetedID` as a NameID) is left
 * out rather than failing the login; a value holding a comment or processing instruction fails it.
 * The record has no prototype: an attribute named `constructor` or `__proto__` is just a name.
 */
const attributesOf = (assertion: Element): Either.Either<Record<string, Array<string>>, SamlRejected> =>
  Either.gen(function*() {
    const attributes: Record<string, Array<string>> = Object.create(null)
    for (const statement of Xml.children(assertion, Xml.ns.assertion, "AttributeStatement")) {
      for (const attribute of Xml.children(statement, Xml.ns.assertion, "Attribute")) {
        const name = attribute.getAttribute("Name") ?? ""
        const values = (attributes[name] ??= [])
        for (const value of Xml.children(attribute, Xml.ns.assertion, "AttributeValue")) {
          if (Array.from(value.childNodes).some((node) => node.nodeType === 1)) continue
          values.push(yield* Xml.text(value))
        }
      }
    }
    return attributes
  })

/** The NotOnOrAfter of the first bearer confirmation that holds, else the last failure among them. */
const bearerConfirmation = (
  subject: Element,
  expected: Expectations,
  inResponseTo: string | undefined
): Either.Either<number, SamlRejected> => {
  let failure: SamlRejected = reject("subject_confirmation", "no bearer SubjectConfirmation")
  for (const confirmation of Xml.children(subject, Xml.ns.assertion, "SubjectConfirmation")) {
    if (confirmation.getAttribute("Method") !== bearer) continue
    const data = Xml.only(confirmation, Xml.ns.assertion, "SubjectConfirmationData")
    const notOnOrAfter = data === undefined ? undefined : Either.getOrUndefined(Xml.time(data, "NotOnOrAfter"))
    if (data === undefined || notOnOrAfter === undefined || data.hasAttribute("NotBefore")) {
      failure = reject("subject_confirmation", "SubjectConfirmationData needs NotOnOrAfter and no NotBefore")
    } else if (data.getAttribute("Recipient") !== expected.acsUrl) {
      failure = reject("recipient", "the Recipient is not this ACS")
    } else if (expected.now >= notOnOrAfter + expected.clockSkewMs) {
      failure = reject("expired", "the SubjectConfirmationData has expired")
    } else if ((data.getAttribute("InResponseTo") || undefined) !== inResponseTo) {
      failure = reject("in_response_to", "the SubjectConfirmationData answers another request")
    } else {
      return Either.right(notOnOrAfter)
    }
  }
  return Either.left(failure)
}

/** Checks a Response's XML and returns the verified identity. */
export const validate = (
  libraries: Libraries.Libraries,
  xml: string,
  expected: Expectations
): Effect.Effect<Validated, SamlRejected> =>
  Effect.gen(function*() {
    const document = yield* Xml.parse(libraries, xml)
    const response = document.documentElement
    if (!Xml.is(response, Xml.ns.protocol, "Response") || response.getAttribute("Version") !== "2.0") {
      return yield* reject("malformed", "the root is not a SAML 2.0 Response")
    }
    const status = Xml.only(Xml.only(response, Xml.ns.protocol, "Status") ?? response, Xml.ns.protocol, "StatusCode")
    if (status?.getAttribute("Value") !== success) return yield* reject("status", "the IdP did not answer Success")

    // At the default the envelope signature is not consulted (a failing one would be discarded
    // anyway, and checking it costs a second canonicalization of the whole message); the
    // assertion signature decides. The exception is an AES-CBC encrypted assertion, below.
    if (expected.wantAuthnResponseSigned) yield* Signature.verifyEnveloped(libraries, document, response, expected.keys)

    const encrypted = Xml.children(response, Xml.ns.assertion, "EncryptedAssertion")
    if (Xml.count(document, Xml.ns.assertion, "EncryptedAssertion") !== encrypted.length || encrypted.length > 1) {
      return yield* reject("assertion_count", "encrypted assertions outside the Response, or several")
    }
    if (encrypted.length === 1) {
      if (expected.decryptionKey === undefined) return yield* reject("encrypted", "an encrypted assertion and no decryptionPvk")
      // A cipher without integrity is decrypted only under a verified envelope signature, which
      // covers the ciphertext: otherwise the answers would be a decryption oracle.
      const ciphertextAuthenticated = expected.wantAuthnResponseSigned || (
        Decrypt.needsAuthenticatedCiphertext(encrypted[0]!) &&
        Either.isRight(yield* Effect.either(Signature.verifyEnveloped(libraries, document, response, expected.keys)))
      )
      yield* Decrypt.decryptAssertion(libraries, document, encrypted[0]!, expected.decryptionKey, ciphertextAuthenticated)
    }
    const assertions = Xml.children(response, Xml.ns.assertion, "Assertion")
    if (assertions.length !== 1 || Xml.count(document, Xml.ns.assertion, "Assertion") !== 1) {
      return yield* reject("assertion_count", "exactly one Assertion, a direct child of the Response, is required")
    }
    const assertion = assertions[0]!
    if (assertion.getAttribute("Version") !== "2.0") return yield* reject("malformed", "the assertion is not SAML 2.0")
    yield* Signature.verifyEnveloped(libraries, document, assertion, expected.keys)

    // From here on, everything is read from the verified Assertion (and the Response attributes
    // the envelope carries, checked against our own values only).
    const issuer = yield* Xml.childText(assertion, Xml.ns.assertion, "Issuer")
    const responseIssuer = yield* Xml.childText(response, Xml.ns.assertion, "Issuer")
    if (issuer !== expected.idpEntityId || (responseIssuer !== undefined && responseIssuer !== expected.idpEntityId)) {
      return yield* reject("issuer", "the Issuer is not the configured IdP")
    }
    const destination = response.getAttribute("Destination")
    if (destination !== null && destination !== expected.acsUrl) return yield* reject("destination", "the Destination is not this ACS")
    const inResponseTo = response.getAttribute("InResponseTo") || undefined

    const subject = Xml.only(assertion, Xml.ns.assertion, "Subject")
    const nameIdElement = subject && Xml.only(subject, Xml.ns.assertion, "NameID")
    if (subject === undefined || nameIdElement === undefined) return yield* reject("malformed", "the assertion names no subject")
    const nameId = yield* Xml.text(nameIdElement)
    const confirmedUntil = yield* bearerConfirmation(subject, expected, inResponseTo)

    const conditions = Xml.only(assertion, Xml.ns.assertion, "Conditions")
    if (conditions === undefined) return yield* reject("audience", "the assertion has no Conditions")
    const notBefore = yield* Xml.time(conditions, "NotBefore")
    const notOnOrAfter = yield* Xml.time(conditions, "NotOnOrAfter")
    if (notBefore !== undefined && expected.now + expected.clockSkewMs < notBefore) {
      return yield* reject("not_yet_valid", "the assertion is not valid yet")
    }
    if (notOnOrAfter !== undefined && expected.now >= notOnOrAfter + expected.clockSkewMs) {
      return yield* reject("expired", "the assertion has expired")
    }
    const restrictions = Xml.children(conditions, Xml.ns.assertion, "AudienceRestriction")
    if (restrictions.length === 0) return yield* reject("audience", "the assertion has no AudienceRestriction")
    for (const restriction of restrictions) {
      const audiences: Array<string> = []
      for (const audience of Xml.children(restriction, Xml.ns.assertion, "Audience")) audiences.push(yield* Xml.text(audience))
      if (!audiences.includes(expected.spEntityId)) return yield* reject("audience", "an AudienceRestriction excludes this SP")
    }

    let sessionNotOnOrAfter: number | undefined
    for (const authn of Xml.children(assertion, Xml.ns.assertion, "AuthnStatement")) {
      const until = yield* Xml.time(authn, "SessionNotOnOrAfter")
      if (until !== undefined) sessionNotOnOrAfter = Math.min(until, sessionNotOnOrAfter ?? until)
    }
    // The IdP has already ended the session it vouches for (with the accepted skew).
    if (sessionNotOnOrAfter !== undefined && expected.now >= sessionNotOnOrAfter + expected.clockSkewMs) {
      return yield* reject("expired", "the IdP session (SessionNotOnOrAfter) has ended")
    }

    const attributes = yield* attributesOf(assertion)
    const emailAttribute = Object.entries(attributes).find(([name]) => emailAttributes.includes(name.toLowerCase()))?.[1][0]
    const statement = Xml.only(assertion, Xml.ns.assertion, "AuthnStatement")
    const nameIdFormat = nameIdElement.getAttribute("Format") || null
    return {
      profile: {
        nameId,
        nameIdFormat,
        sessionIndex: statement?.getAttribute("SessionIndex") || null,
        // A NameID is an address only when its format says so: a username that merely contains
        // an "@" must not pass for somebody's email.
        email: emailAttribute ?? (nameIdFormat === emailFormat ? nameId : null),
        issuer,
        attributes
      },
      inResponseTo,
      assertionId: assertion.getAttribute("ID")!,
      expiresAt: Math.min(notOnOrAfter ?? confirmedUntil, confirmedUntil) + expected.clockSkewMs,
      sessionNotOnOrAfter
    }
  })
