/**
 * Signature checks (DESIGN, "SAML"). Enveloped XML signatures are verified with `xmldsigjs`
 * against the configured IdP keys only, after structural checks that bind the signature to the
 * element it sits in: exactly one Signature as a direct child, exactly one Reference whose URI is
 * `#` + that element's ID, allow-listed transforms and algorithms, no SHA-1. Redirect-binding
 * signatures cover the query string as received, so they are checked over the raw octets.
 */
import { Effect, Either } from "effect"
import { createSign, type KeyObject, verify as verifyBytes } from "node:crypto"
import { reject, type SamlRejected } from "./Errors.js"
import * as Keys from "./Keys.js"
import type * as Libraries from "./Libraries.js"
import * as Xml from "./Xml.js"

interface SignatureAlgorithm {
  readonly hash: "SHA-256" | "SHA-384" | "SHA-512"
  readonly family: "rsa" | "ec"
}

const signatureAlgorithms: Readonly<Record<string, SignatureAlgorithm>> = {
  "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256": { hash: "SHA-256", family: "rsa" },
  "http://www.w3.org/2001/04/xmldsig-more#rsa-sha384": { hash: "SHA-384", family: "rsa" },
  "http://www.w3.org/2001/04/xmldsig-more#rsa-sha512": { hash: "SHA-512", family: "rsa" },
  "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256": { hash: "SHA-256", family: "ec" },
  "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384": { hash: "SHA-384", family: "ec" }
}

const digestAlgorithms = new Set([
  "http://www.w3.org/2001/04/xmlenc#sha256",
  "http://www.w3.org/2001/04/xmldsig-more#sha384",
  "http://www.w3.org/2001/04/xmlenc#sha512"
])

const canonicalizations = new Set([
  "http://www.w3.org/2001/10/xml-exc-c14n#",
  "http://www.w3.org/2001/10/xml-exc-c14n#WithComments",
  "http://www.w3.org/TR/2001/REC-xml-c14n-20010315",
  "http://www.w3.org/TR/2001/REC-xml-c14n-20010315#WithComments"
])

const enveloped = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
const transforms = new Set([enveloped, ...canonicalizations])

// The algorithms of the SP's own redirect-binding signatures.
const rsaSha256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
const ecdsaSha256 = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256"

const nodeHash = (algorithm: SignatureAlgorithm) => algorithm.hash.replace("-", "").toLowerCase()

/**
 * The structure of an enveloped signature: the one Signature child of `element`, signing exactly
 * that element with allow-listed algorithms. Returns the Signature and its algorithm.
 */
const structure = (
  element: Element
): Either.Either<{ readonly signature: Element; readonly algorithm: SignatureAlgorithm }, SamlRejected> => {
  const signatures = Xml.children(element, Xml.ns.dsig, "Signature")
  if (signatures.length === 0) return Either.left(reject("signature_missing", `<${element.localName}> is not signed`))
  if (signatures.length > 1) return Either.left(reject("signature", `<${element.localName}> has several signatures`))
  const signature = signatures[0]!
  const signedInfo = Xml.only(signature, Xml.ns.dsig, "SignedInfo")
  if (signedInfo === undefined || Xml.only(signature, Xml.ns.dsig, "SignatureValue") === undefined) {
    return Either.left(reject("signature", "the signature needs exactly one SignedInfo and one SignatureValue"))
  }
  const c14n = Xml.only(signedInfo, Xml.ns.dsig, "CanonicalizationMethod")?.getAttribute("Algorithm") ?? ""
  const algorithm = signatureAlgorithms[Xml.only(signedInfo, Xml.ns.dsig, "SignatureMethod")?.getAttribute("Algorithm") ?? ""]
  if (!canonicalizations.has(c14n) || algorithm === undefined) {
    return Either.left(reject("algorithm", "the canonicalization or signature algorithm is not allowed"))
  }
  const references = Xml.children(signedInfo, Xml.ns.dsig, "Reference")
  const id = element.getAttribute("ID") ?? ""
  if (references.length !== 1 || id === "" || references[0]!.getAttribute("URI") !== `#${id}`) {
    return Either.left(reject("reference", `the signature must reference exactly <${element.localName}> itself`))
  }
  const reference = references[0]!
  const steps = Xml.children(Xml.only(reference, Xml.ns.dsig, "Transforms") ?? reference, Xml.ns.dsig, "Transform")
    .map((transform) => transform.getAttribute("Algorithm") ?? "")
  const digest = Xml.only(reference, Xml.ns.dsig, "DigestMethod")?.getAttribute("Algorithm") ?? ""
  if (!steps.includes(enveloped) || steps.some((step) => !transforms.has(step)) || !digestAlgorithms.has(digest)) {
    return Either.left(reject("algorithm", "a transform or the digest algorithm is not allowed"))
  }
  if (Xml.children(reference, Xml.ns.dsig, "DigestValue").length !== 1) {
    return Either.left(reject("signature", "the reference needs exactly one DigestValue"))
  }
  return Either.right({ signature, algorithm })
}

const importFor = (key: Keys.TrustedKey, algorithm: SignatureAlgorithm): Promise<CryptoKey> => {
  const name = `${algorithm.family}:${algorithm.hash}`
  let imported = key.imported.get(name)
  if (imported === undefined) {
    const spki = key.publicKey.export({ type: "spki", format: "der" })
    imported = algorithm.family === "rsa"
      ? crypto.subtle.importKey("spki", spki, { name: "RSASSA-PKCS1-v1_5", hash: algorithm.hash }, true, ["verify"])
      : crypto.subtle.importKey("spki", spki, { name: "ECDSA", namedCurve: Keys.namedCurve(key.publicKey) ?? "" }, true, ["verify"])
    key.imported.set(name, imported)
  }
  return imported
}

type SignedXmlClass = Libraries.Libraries["xmldsig"]["SignedXml"]

/** xmldsigjs's `SignedXml` with its SignedInfo check (protected there) callable on its own. */
interface EarlyCheckedSignedXml extends InstanceType<SignedXmlClass> {
  signedInfoVerifies(key: CryptoKey): Promise<boolean>
}

const earlyChecked = new WeakMap<SignedXmlClass, new(document: Document) => EarlyCheckedSignedXml>()

const signedXmlClass = (libraries: Libraries.Libraries) => {
  let checked = earlyChecked.get(libraries.xmldsig.SignedXml)
  if (checked === undefined) {
    checked = class extends libraries.xmldsig.SignedXml {
      signedInfoVerifies(key: CryptoKey) {
        return this.ValidateSignatureValue([key])
      }
    }
    earlyChecked.set(libraries.xmldsig.SignedXml, checked)
  }
  return checked
}

const familyOf = (key: KeyObject) => key.asymmetricKeyType === "rsa" ? "rsa" : key.asymmetricKeyType === "ec" ? "ec" : undefined

/**
 * Verifies the enveloped signature of `element` (in `document`, the one parsed Document) with one
 * of `keys`. Fails `signature_missing` when there is none, and `signature` when no key verifies it.
 */
export const verifyEnveloped = (
  libraries: Libraries.Libraries,
  document: Document,
  element: Element,
  keys: ReadonlyArray<Keys.TrustedKey>
): Effect.Effect<void, SamlRejected> =>
  Effect.flatMap(structure(element), ({ algorithm, signature }) =>
    Effect.tryPromise(async () => {
      for (const key of keys) {
        if (familyOf(key.publicKey) !== algorithm.family) continue
        // A fresh SignedXml per key over the same Document: no re-serialisation, no second parse.
        const signed = new (signedXmlClass(libraries))(document)
        try {
          signed.LoadXml(signature)
          const curve = Keys.namedCurve(key.publicKey)
          // xmldsigjs re-imports EC keys without their curve unless the algorithm names it.
          if (curve !== undefined) signed.Algorithm = { ...signed.Algorithm, namedCurve: curve } as EcKeyImportParams
          const trusted = await importFor(key, algorithm)
          // The SignatureValue over SignedInfo first: SignedInfo is small, while the referenced
          // element can hold thousands of elements. xmldsigjs's Verify clones the document and
          // canonicalizes the reference before it looks at the signature, so a forgery would cost
          // that work; checked first, only a SignedInfo the IdP really signed gets that far.
          if (!(await signed.signedInfoVerifies(trusted))) continue
          if (await signed.Verify(trusted)) return true
        } catch {
          // A digest mismatch, a duplicate ID or bad base64: not verified by this key.
        }
      }
      return false
    }).pipe(
      Effect.orElseSucceed(() => false),
      Effect.flatMap((verified) =>
        verified ? Effect.void : Effect.fail(reject("signature", `the signature of <${element.localName}> does not verify`))
      )
    ))

/** The parts of a redirect-binding query, raw (still percent-encoded) as received. */
export interface RedirectQuery {
  readonly parameter: "SAMLRequest" | "SAMLResponse"
  readonly message: string
  readonly relayState: string | undefined
  readonly sigAlg: string | undefined
  readonly signature: string | undefined
}

/** Splits a raw query string; a repeated or missing message parameter is malformed. */
export const redirectQuery = (rawQuery: string): Either.Either<RedirectQuery, SamlRejected> => {
  const raw = new Map<string, string>()
  for (const pair of rawQuery.replace(/^\?/, "").split("&")) {
    if (pair === "") continue
    const eq = pair.indexOf("=")
    const name = eq === -1 ? pair : pair.slice(0, eq)
    if (raw.has(name)) return Either.left(reject("malformed", `the query repeats ${name}`))
    raw.set(name, eq === -1 ? "" : pair.slice(eq + 1))
  }
  const request = raw.get("SAMLRequest")
  const response = raw.get("SAMLResponse")
  if ((request === undefined) === (response === undefined)) {
    return Either.left(reject("malformed", "exactly one of SAMLRequest and SAMLResponse is required"))
  }
  return Either.right({
    parameter: request !== undefined ? "SAMLRequest" : "SAMLResponse",
    message: request ?? response!,
    relayState: raw.get("RelayState"),
    sigAlg: raw.get("SigAlg"),
    signature: raw.get("Signature")
  })
}

/** A percent-decoded query value (`+` is a space), undefined when the encoding is broken. */
export const decodeComponent = (raw: string): string | undefined => {
  try {
    return decodeURIComponent(raw.replace(/\+/g, " "))
  } catch {
    return undefined
  }
}

/** Whether a redirect-binding query carries a signature at all (`Signature` and `SigAlg`). */
export const hasRedirectSignature = (query: RedirectQuery): boolean => query.signature !== undefined && query.sigAlg !== undefined

/** The octets a redirect-binding signature covers, in the binding's fixed order. */
const signedOctets = (query: Pick<RedirectQuery, "parameter" | "message" | "relayState">, sigAlg: string) =>
  `${query.parameter}=${query.message}${query.relayState === undefined ? "" : `&RelayState=${query.relayState}`}&SigAlg=${sigAlg}`

/**
 * Verifies a redirect-binding signature over the raw query. A query without `Signature` or
 * `SigAlg` is `signature_missing` before anything else is looked at.
 */
export const verifyRedirect = (query: RedirectQuery, keys: ReadonlyArray<Keys.TrustedKey>): Either.Either<void, SamlRejected> => {
  if (query.signature === undefined || query.sigAlg === undefined) {
    return Either.left(reject("signature_missing", "the message is not signed"))
  }
  const algorithm = signatureAlgorithms[decodeComponent(query.sigAlg) ?? ""]
  if (algorithm === undefined) return Either.left(reject("algorithm", "SigAlg is not allowed"))
  const signature = Buffer.from(decodeComponent(query.signature) ?? "", "base64")
  const octets = Buffer.from(signedOctets(query, query.sigAlg))
  const verified = keys.some((key) =>
    familyOf(key.publicKey) === algorithm.family &&
    verifyBytes(nodeHash(algorithm), octets, { key: key.publicKey, dsaEncoding: "ieee-p1363" }, signature)
  )
  return verified ? Either.right(undefined) : Either.left(reject("signature", "the redirect signature does not verify"))
}

/** Signs an outgoing redirect-binding query (`SAMLRequest=…[&RelayState=…]`), appending `SigAlg` and `Signature`. */
export const signRedirect = (
  query: Pick<RedirectQuery, "parameter" | "message" | "relayState">,
  key: KeyObject
): string => {
  const sigAlg = encodeURIComponent(key.asymmetricKeyType === "ec" ? ecdsaSha256 : rsaSha256)
  const octets = signedOctets(query, sigAlg)
  const signature = createSign("sha256").update(octets).sign({ key, dsaEncoding: "ieee-p1363" }).toString("base64")
  return `${octets}&Signature=${encodeURIComponent(signature)}`
}
