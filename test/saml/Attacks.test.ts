/**
 * The SAML attack checklist (notes, auth-providers-saml §5), each case over real sockets against
 * `/saml/acs`: the malicious response answers a real outstanding AuthnRequest, and it must be
 * refused (400 when it is not acceptable XML, 401 otherwise) without setting a session.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Xml from "../../src/saml/Xml.js"
import * as Idp from "./support/Idp.js"
import * as Sp from "./support/Sp.js"

type Build = (request: { readonly id: string; readonly now: number }) => string | Promise<string>

const ds = Idp.ns.dsig

/** Serves an SP, answers a fresh AuthnRequest with `build`, and checks the refusal. */
const refused = (build: Build, expected: { readonly status?: number; readonly reason?: string } = {}) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(Date.UTC(2026, 10, 23, 12))
    const sp = yield* Sp.serve(Sp.memory)
    const request = yield* Sp.startLogin(sp.served.url)
    const xml = yield* Effect.promise(async () => build({ id: request.id, now: Date.UTC(2026, 10, 23, 12) }))
    const answer = yield* Sp.postToAcs(sp.served.url, xml, request)
    assert.strictEqual(answer.status, expected.status ?? 401, answer.body)
    if (expected.reason !== undefined) assert.strictEqual(JSON.parse(answer.body).reason, expected.reason, answer.body)
    assert.isUndefined(Sp.Browser.setCookie(answer, "fw:session"))
    assert.notInclude(answer.body, "alice@")
  })

const fields = (request: { readonly id: string; readonly now: number }, more: Partial<Idp.ResponseFields> = {}): Idp.ResponseFields => ({
  now: request.now,
  inResponseTo: request.id,
  ...more
})

const evilAssertion = (request: { readonly id: string; readonly now: number }) =>
  Idp.dom(Idp.assertionXml(fields(request, { assertionId: "_evil", nameId: "admin@example.test" }))).documentElement!

/** The signed response as a DOM, with handles on its parts. */
const parts = (xml: string) => {
  const document = Idp.dom(xml)
  const response = document.documentElement!
  const assertion = document.getElementsByTagNameNS(Idp.ns.assertion, "Assertion")[0]!
  return { document, response, assertion }
}

const firstChild = (parent: { getElementsByTagNameNS: (ns: string, local: string) => ArrayLike<unknown> }, ns: string, local: string) =>
  parent.getElementsByTagNameNS(ns, local)[0] as ReturnType<typeof Idp.dom>["documentElement"] & {}

describe("SAML attacks are refused and set no session", () => {
  // Signature wrapping (XSW). 1 and 2 target a response signature, the others the assertion's.
  it.scoped("XSW1: the signed Response copied into the evil Response's Signature Object", () =>
    refused((request) => {
      const signed = Idp.signResponse(Idp.responseXml(fields(request), Idp.assertionXml(fields(request))))
      const { document, response } = parts(signed)
      const evil = response.cloneNode(true) as typeof response
      evil.setAttribute("ID", "_evil_response")
      const evilNameId = firstChild(evil, Idp.ns.assertion, "NameID")
      evilNameId.textContent = "admin@example.test"
      const original = response.cloneNode(true) as typeof response
      original.removeChild(firstChild(original, ds, "Signature"))
      const object = document.createElementNS(ds, "ds:Object")
      object.appendChild(original)
      firstChild(evil, ds, "Signature").appendChild(object)
      return Idp.xmlOf(evil)
    }, { reason: "assertion_count" }))

  it.scoped("XSW2: the signed Response as a detached sibling before the Signature", () =>
    refused((request) => {
      const signed = Idp.signResponse(Idp.responseXml(fields(request), Idp.assertionXml(fields(request))))
      const { response } = parts(signed)
      const evil = response.cloneNode(true) as typeof response
      evil.setAttribute("ID", "_evil_response")
      firstChild(evil, Idp.ns.assertion, "NameID").textContent = "admin@example.test"
      const original = response.cloneNode(true) as typeof response
      original.removeChild(firstChild(original, ds, "Signature"))
      const signature = firstChild(evil, ds, "Signature")
      evil.insertBefore(original, signature)
      return Idp.xmlOf(evil)
    }, { reason: "assertion_count" }))

  it.scoped("XSW3: an unsigned evil Assertion before the signed one", () =>
    refused((request) => {
      const { assertion, document, response } = parts(Idp.validResponse(fields(request)))
      response.insertBefore(document.importNode(evilAssertion(request), true), assertion)
      return Idp.xmlOf(document)
    }, { reason: "assertion_count" }))

  it.scoped("XSW4: the evil Assertion wraps the signed one", () =>
    refused((request) => {
      const { assertion, document, response } = parts(Idp.validResponse(fields(request)))
      const evil = document.importNode(evilAssertion(request), true)
      response.replaceChild(evil, assertion)
      evil.appendChild(assertion)
      return Idp.xmlOf(document)
    }, { reason: "assertion_count" }))

  it.scoped("XSW5: the evil Assertion carries the original Signature; an unsigned copy of the original is appended", () =>
    refused((request) => {
      const { assertion, document, response } = parts(Idp.validResponse(fields(request)))
      const evil = document.importNode(evilAssertion(request), true)
      evil.setAttribute("ID", "_assertion1")
      const signature = firstChild(assertion, ds, "Signature")
      assertion.removeChild(signature)
      evil.insertBefore(signature, evil.firstChild!.nextSibling)
      response.replaceChild(evil, assertion)
      response.appendChild(assertion)
      return Idp.xmlOf(document)
    }, { reason: "assertion_count" }))

  it.scoped("XSW6: the evil Assertion carries the Signature, the original nested inside it", () =>
    refused((request) => {
      const { assertion, document, response } = parts(Idp.validResponse(fields(request)))
      const evil = document.importNode(evilAssertion(request), true)
      evil.setAttribute("ID", "_assertion1")
      response.replaceChild(evil, assertion)
      const signature = firstChild(assertion, ds, "Signature")
      assertion.removeChild(signature)
      evil.insertBefore(signature, evil.firstChild!.nextSibling)
      signature.appendChild(assertion)
      return Idp.xmlOf(document)
    }, { reason: "assertion_count" }))

  it.scoped("XSW7: the signed Assertion moved into samlp:Extensions, the evil one in its place", () =>
    refused((request) => {
      const { assertion, document, response } = parts(Idp.validResponse(fields(request)))
      const extensions = document.createElementNS(Idp.ns.protocol, "samlp:Extensions")
      response.replaceChild(document.importNode(evilAssertion(request), true), assertion)
      extensions.appendChild(assertion)
      response.insertBefore(extensions, response.firstChild!.nextSibling)
      return Idp.xmlOf(document)
    }, { reason: "assertion_count" }))

  it.scoped("XSW8: the evil Assertion's Signature holds an Object with the original minus its signature", () =>
    refused((request) => {
      const { assertion, document, response } = parts(Idp.validResponse(fields(request)))
      const evil = document.importNode(evilAssertion(request), true)
      const signature = firstChild(assertion, ds, "Signature").cloneNode(true) as typeof assertion
      const original = assertion.cloneNode(true) as typeof assertion
      original.removeChild(firstChild(original, ds, "Signature"))
      const object = document.createElementNS(ds, "ds:Object")
      object.appendChild(original)
      signature.appendChild(object)
      evil.insertBefore(signature, evil.firstChild!.nextSibling)
      response.replaceChild(evil, assertion)
      return Idp.xmlOf(document)
    }, { reason: "assertion_count" }))

  it.scoped("signature stripped from the assertion", () =>
    refused((request) => {
      const { assertion, document } = parts(Idp.validResponse(fields(request)))
      assertion.removeChild(firstChild(assertion, ds, "Signature"))
      return Idp.xmlOf(document)
    }, { reason: "signature_missing" }))

  it.scoped("an unsigned assertion inside a signed response", () =>
    refused((request) => Idp.signResponse(Idp.responseXml(fields(request), Idp.assertionXml(fields(request)))), { reason: "signature_missing" }))

  it.scoped("two validly signed assertions spliced into one response", () =>
    refused((request) => {
      const { document, response } = parts(Idp.validResponse(fields(request)))
      const second = parts(Idp.validResponse(fields(request, { assertionId: "_assertion2", nameId: "admin@example.test" })))
      response.appendChild(document.importNode(second.assertion, true))
      return Idp.xmlOf(document)
    }, { reason: "assertion_count" }))

  it.scoped("a reference pointing at the Response, or at the whole document", () =>
    Effect.gen(function*() {
      for (const uri of ["#_response1", ""]) {
        yield* refused((request) => {
          const { document } = parts(Idp.validResponse(fields(request)))
          firstChild(document, ds, "Reference").setAttribute("URI", uri)
          return Idp.xmlOf(document)
        }, { reason: "reference" })
      }
    }))

  it.scoped("KeyInfo substitution: re-signed by an attacker key with the attacker's certificate in KeyInfo", () =>
    refused((request) => Idp.signAssertion(Idp.responseXml(fields(request), Idp.assertionXml(fields(request))), { keys: Idp.evilKeys, keyInfo: true }), {
      reason: "signature"
    }))

  it.scoped("comment injection in NameID (the digest survives exclusive c14n)", () =>
    refused((request) =>
      Idp.validResponse(fields(request, { nameId: "alice@example.test.evil.test", email: "x@evil.test" }))
        .replace("alice@example.test.evil.test</saml:NameID>", "alice@example.test<!---->.evil.test</saml:NameID>"), { reason: "node_text" }))

  it.scoped("processing-instruction injection in NameID", () =>
    refused((request) =>
      Idp.validResponse(fields(request, { nameId: "alice@example.test.evil.test", email: "x@evil.test" }))
        .replace("alice@example.test.evil.test</saml:NameID>", "alice@example.test<?x .evil.test?></saml:NameID>")))

  it.scoped("DTD / external entity", () =>
    refused((request) =>
      `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>` + Idp.validResponse(fields(request)), {
      status: 400,
      reason: "dtd"
    }))

  it.scoped("malformed XML: not XML, two roots, an unclosed tag", () =>
    Effect.gen(function*() {
      for (const build of [() => "not xml", (r: { id: string; now: number }) => Idp.validResponse(fields(r)) + "<extra/>", () => "<samlp:Response"]) {
        yield* refused(build, { status: 400, reason: "malformed" })
      }
    }))

  it.scoped("oversize input: 300 KiB of XML is refused after decoding, 2 MiB by the body cap before it is read", () =>
    Effect.gen(function*() {
      const padded = (request: { readonly id: string; readonly now: number }, bytes: number) =>
        Idp.validResponse(fields(request)).replace("</samlp:Response>", `<!--${"x".repeat(bytes)}--></samlp:Response>`)
      yield* refused((request) => padded(request, 300 * 1024), { status: 400, reason: "too_large" })
      yield* refused((request) => padded(request, 2 * 1024 * 1024), { status: 413 })
    }))

  it.scoped("wrong audience, or a second AudienceRestriction that excludes this SP", () =>
    Effect.gen(function*() {
      yield* refused((request) => Idp.validResponse(fields(request, { audiences: [["https://other.example.test"]] })), { reason: "audience" })
      yield* refused((request) => Idp.validResponse(fields(request, { audiences: [[Idp.spEntityId], ["https://other.example.test"]] })), { reason: "audience" })
    }))

  it.scoped("wrong recipient, destination or issuer", () =>
    Effect.gen(function*() {
      yield* refused((request) => Idp.validResponse(fields(request, { recipient: "https://other.example.test/acs" })), { reason: "recipient" })
      yield* refused((request) => Idp.validResponse(fields(request, { destination: "https://other.example.test/acs" })), { reason: "destination" })
      yield* refused((request) => Idp.validResponse(fields(request, { issuer: "https://evil.example.test" })), { reason: "issuer" })
    }))

  it.scoped("expired and not-yet-valid assertions", () =>
    Effect.gen(function*() {
      yield* refused((request) => Idp.validResponse(fields(request, { notOnOrAfter: request.now - 1_000 })), { reason: "expired" })
      yield* refused((request) => Idp.validResponse(fields(request, { confirmationNotOnOrAfter: request.now - 1_000 })), { reason: "expired" })
      yield* refused((request) => Idp.validResponse(fields(request, { notBefore: request.now + 60_000 })), { reason: "not_yet_valid" })
    }))

  it.scoped("a SHA-1 signature", () =>
    refused((request) => Idp.signAssertion(Idp.responseXml(fields(request), Idp.assertionXml(fields(request))), { sha1: true }), {
      reason: "algorithm"
    }))

  it.scoped("an unsolicited response (no InResponseTo) while replay protection is on", () =>
    refused((request) => Idp.validResponse(fields(request, { inResponseTo: null })), { reason: "unsolicited" }))

  it.scoped("a response answering a request the SP never issued", () =>
    refused((request) => Idp.validResponse(fields(request, { inResponseTo: "_forged" })), { reason: "in_response_to" }))

  it.scoped("encrypted assertions: AES-CBC without an envelope signature and altered AES-GCM get one indistinguishable answer", () =>
    Effect.gen(function*() {
      const answers: Array<string> = []
      const capture = (build: Build) =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.UTC(2026, 10, 23, 12))
          const sp = yield* Sp.serve(Sp.memory)
          const request = yield* Sp.startLogin(sp.served.url)
          const answer = yield* Sp.postToAcs(sp.served.url, yield* Effect.promise(async () => build({ id: request.id, now: Date.UTC(2026, 10, 23, 12) })), request)
          assert.isUndefined(Sp.Browser.setCookie(answer, "fw:session"))
          answers.push(`${answer.status} ${answer.body}`)
        })
      const encrypted = (request: { readonly id: string; readonly now: number }, algorithm: "gcm" | "cbc") =>
        Idp.encryptAssertion(Idp.validResponse(fields(request)), algorithm)
      // Flips one bit of the content ciphertext (the last CipherValue).
      const altered = async (request: { readonly id: string; readonly now: number }) => {
        const xml = await encrypted(request, "gcm")
        const values = [...xml.matchAll(/<xenc:CipherValue>([^<]+)<\/xenc:CipherValue>/g)]
        const last = values.at(-1)!
        const bytes = Buffer.from(last[1]!, "base64")
        bytes[20]! ^= 1
        return xml.replace(last[1]!, bytes.toString("base64"))
      }
      yield* capture((request) => encrypted(request, "cbc"))
      yield* capture(altered)
      assert.strictEqual(answers.length, 2)
      assert.strictEqual(answers[0], answers[1])
      assert.include(answers[0]!, `"reason":"decryption"`)
    }))

  it.scoped("more elements than a response ever has is refused before any signature work", () =>
    refused((request) => Idp.validResponse(fields(request)).replace("</samlp:Response>", `${"<a/>".repeat(10_000)}</samlp:Response>`), {
      status: 400,
      reason: "too_large"
    }))

  it.scoped("empty elements packed just past the element limit are refused before any signature work, inside the assertion too", () =>
    Effect.gen(function*() {
      const packed = "<a/>".repeat(Xml.maxElements)
      yield* refused((request) => Idp.validResponse(fields(request)).replace("</samlp:Response>", `${packed}</samlp:Response>`), {
        status: 400,
        reason: "too_large"
      })
      yield* refused((request) => Idp.validResponse(fields(request)).replace("</saml:AttributeStatement>", `${packed}</saml:AttributeStatement>`), {
        status: 400,
        reason: "too_large"
      })
    }))

  it.scoped("deeper nesting than the depth limit is refused before any signature work", () =>
    refused((request) =>
      Idp.validResponse(fields(request)).replace("</saml:AttributeStatement>", `${"<a>".repeat(Xml.maxDepth)}${"</a>".repeat(Xml.maxDepth)}</saml:AttributeStatement>`), {
      status: 400,
      reason: "too_large"
    }))

  it.scoped("a forged SignatureValue over an assertion at the element limit is refused (checked before the assertion is canonicalized)", () =>
    refused((request) =>
      Idp.validResponse(fields(request))
        .replace("</saml:AttributeStatement>", `${"<a/>".repeat(Xml.maxElements - 100)}</saml:AttributeStatement>`)
        .replace(/<ds:SignatureValue>(.)/, (_, first: string) => `<ds:SignatureValue>${first === "A" ? "B" : "A"}`), { reason: "signature" }))
})
