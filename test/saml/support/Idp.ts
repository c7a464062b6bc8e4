/**
 * A test IdP: SAML responses built here and signed by independent libraries (`xml-crypto`, and
 * `samlify` acting as an IdP), encrypted with `xml-encryption`, with the keys in `../fixtures`
 * (self-signed openssl certificates: the IdP's RSA and EC keys, a rotated IdP key, the SP's key,
 * and an attacker's).
 */
import { DOMParser, XMLSerializer } from "@xmldom/xmldom"
import { readFileSync } from "node:fs"
import { constants, createCipheriv, createHash, createPublicKey, createSign, publicEncrypt, randomBytes, sign as nodeSign, X509Certificate } from "node:crypto"
import { deflateRawSync } from "node:zlib"
import * as samlify from "samlify"
import { SignedXml } from "xml-crypto"
import * as xmlenc from "xml-encryption"
import * as Keys from "../../../src/saml/Keys.js"
import type * as LoginResponse from "../../../src/saml/LoginResponse.js"

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url), "utf8")

/** A key pair with its certificate. */
export interface KeyPair {
  readonly key: string
  readonly cert: string
}

const pair = (name: string): KeyPair => ({ key: fixture(`${name}.key`), cert: fixture(`${name}.crt`) })

export const idpKeys = pair("idp")
export const rotatedIdpKeys = pair("idp2")
export const ecIdpKeys = pair("idp-ec")
export const spKeys = pair("sp")
export const evilKeys = pair("evil")

export const idpEntityId = "https://idp.example.test/metadata"
export const idpSsoUrl = "https://idp.example.test/sso"
export const idpSloUrl = "https://idp.example.test/slo"
export const spEntityId = "https://app.example.test/saml/metadata"
export const acsUrl = "https://app.example.test/saml/acs"
export const sloUrl = "https://app.example.test/saml/slo"

/**
 * What an SP of this IdP validates a response against at `now`: these entity ids and ACS URL, the
 * IdP's certificate trusted, no decryption key, no clock skew, the assertion's signature enough;
 * `more` overrides any of it.
 */
export const expectations = (now: number, more: Partial<LoginResponse.Expectations> = {}): LoginResponse.Expectations => ({
  idpEntityId,
  spEntityId,
  acsUrl,
  keys: [Keys.trust(idpKeys.cert)],
  decryptionKey: undefined,
  wantAuthnResponseSigned: false,
  clockSkewMs: 0,
  now,
  ...more
})

const ns = {
  protocol: "urn:oasis:names:tc:SAML:2.0:protocol",
  assertion: "urn:oasis:names:tc:SAML:2.0:assertion",
  dsig: "http://www.w3.org/2000/09/xmldsig#"
}

/** What a built response says; every field has a valid default. */
export interface ResponseFields {
  readonly now: number
  readonly inResponseTo?: string | null
  readonly responseId?: string
  readonly assertionId?: string
  readonly nameId?: string
  readonly email?: string
  readonly issuer?: string
  readonly audiences?: ReadonlyArray<ReadonlyArray<string>>
  readonly recipient?: string
  readonly destination?: string | null
  readonly notBefore?: number
  readonly notOnOrAfter?: number
  readonly confirmationNotOnOrAfter?: number
  readonly sessionIndex?: string
  /** The AuthnStatement's SessionNotOnOrAfter (absent by default). */
  readonly sessionNotOnOrAfter?: number
}

const iso = (millis: number) => new Date(millis).toISOString()

/** The unsigned assertion element. */
export const assertionXml = (fields: ResponseFields): string => {
  const now = fields.now
  const inResponseTo = fields.inResponseTo === undefined || fields.inResponseTo === null ? "" : ` InResponseTo="${fields.inResponseTo}"`
  const audiences = (fields.audiences ?? [[spEntityId]])
    .map((group) => `<saml:AudienceRestriction>${group.map((audience) => `<saml:Audience>${audience}</saml:Audience>`).join("")}</saml:AudienceRestriction>`)
    .join("")
  return `<saml:Assertion xmlns:saml="${ns.assertion}" ID="${fields.assertionId ?? "_assertion1"}" Version="2.0" IssueInstant="${iso(now)}">` +
    `<saml:Issuer>${fields.issuer ?? idpEntityId}</saml:Issuer>` +
    `<saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">${fields.nameId ?? "alice@example.test"}</saml:NameID>` +
    `<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData` +
    ` NotOnOrAfter="${iso(fields.confirmationNotOnOrAfter ?? now + 5 * 60_000)}" Recipient="${fields.recipient ?? acsUrl}"${inResponseTo}/>` +
    `</saml:SubjectConfirmation></saml:Subject>` +
    `<saml:Conditions NotBefore="${iso(fields.notBefore ?? now - 60_000)}" NotOnOrAfter="${iso(fields.notOnOrAfter ?? now + 5 * 60_000)}">${audiences}</saml:Conditions>` +
    `<saml:AuthnStatement AuthnInstant="${iso(now)}" SessionIndex="${fields.sessionIndex ?? "_session1"}"` +
    `${fields.sessionNotOnOrAfter === undefined ? "" : ` SessionNotOnOrAfter="${iso(fields.sessionNotOnOrAfter)}"`}><saml:AuthnContext>` +
    `<saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef>` +
    `</saml:AuthnContext></saml:AuthnStatement>` +
    `<saml:AttributeStatement><saml:Attribute Name="email"><saml:AttributeValue>${fields.email ?? fields.nameId ?? "alice@example.test"}</saml:AttributeValue></saml:Attribute></saml:AttributeStatement>` +
    `</saml:Assertion>`
}

/** A Response around `assertion` (an element's XML, signed or not). */
export const responseXml = (fields: ResponseFields, assertion: string): string => {
  const inResponseTo = fields.inResponseTo === undefined || fields.inResponseTo === null ? "" : ` InResponseTo="${fields.inResponseTo}"`
  const destination = fields.destination === null ? "" : ` Destination="${fields.destination ?? acsUrl}"`
  return `<samlp:Response xmlns:samlp="${ns.protocol}" xmlns:saml="${ns.assertion}" ID="${fields.responseId ?? "_response1"}" Version="2.0"` +
    ` IssueInstant="${iso(fields.now)}"${destination}${inResponseTo}>` +
    `<saml:Issuer>${fields.issuer ?? idpEntityId}</saml:Issuer>` +
    `<samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>` +
    assertion +
    `</samlp:Response>`
}

/** Signing choices (defaults: RSA-SHA256, SHA-256 digest, exclusive c14n, the IdP key). */
export interface SignOptions {
  readonly keys?: KeyPair
  readonly sha1?: boolean
  /** Embed the signer's certificate in KeyInfo (what an attacker does in a KeyInfo substitution). */
  readonly keyInfo?: boolean
  /** Sign with ECDSA-SHA256 (`keys` must then be an EC pair, e.g. `ecIdpKeys`). */
  readonly ecdsa?: boolean
}

const ecdsaSha256 = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256"

/** ECDSA-SHA256 for xml-crypto, which has no ECDSA of its own (XML DSig wants r‖s, IEEE P1363). */
class EcdsaSigner {
  getSignature(signedInfo: string, privateKey: string) {
    return nodeSign("sha256", Buffer.from(signedInfo), { key: privateKey, dsaEncoding: "ieee-p1363" }).toString("base64")
  }
  verifySignature() {
    return false
  }
  getAlgorithmName() {
    return ecdsaSha256
  }
}

const sign = (xml: string, target: "Assertion" | "Response", options: SignOptions = {}): string => {
  const keys = options.keys ?? idpKeys
  const signer = new SignedXml({
    privateKey: keys.key,
    ...(options.keyInfo ? { publicCert: keys.cert } : {}),
    signatureAlgorithm: options.ecdsa
      ? ecdsaSha256
      : options.sha1
      ? "http://www.w3.org/2000/09/xmldsig#rsa-sha1"
      : "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
    canonicalizationAlgorithm: "http://www.w3.org/2001/10/xml-exc-c14n#"
  })
  if (options.ecdsa) signer.SignatureAlgorithms = { ...signer.SignatureAlgorithms, [ecdsaSha256]: EcdsaSigner as never }
  const path = target === "Assertion"
    ? "/*[local-name(.)='Response']/*[local-name(.)='Assertion']"
    : "/*[local-name(.)='Response']"
  signer.addReference({
    xpath: path,
    digestAlgorithm: options.sha1 ? "http://www.w3.org/2000/09/xmldsig#sha1" : "http://www.w3.org/2001/04/xmlenc#sha256",
    transforms: ["http://www.w3.org/2000/09/xmldsig#enveloped-signature", "http://www.w3.org/2001/10/xml-exc-c14n#"]
  })
  signer.computeSignature(xml, { prefix: "ds", location: { reference: `${path}/*[local-name(.)='Issuer']`, action: "after" } })
  return signer.getSignedXml()
}

/** Signs the (first) Assertion of a Response with xml-crypto. */
export const signAssertion = (xml: string, options?: SignOptions): string => sign(xml, "Assertion", options)

/** Signs the Response envelope with xml-crypto. */
export const signResponse = (xml: string, options?: SignOptions): string => sign(xml, "Response", options)

/** A valid response answering `inResponseTo`, its assertion signed. */
export const validResponse = (fields: ResponseFields): string => signAssertion(responseXml(fields, assertionXml(fields)))

/** Replaces the Assertion of a signed response by its encryption for the SP (xml-encryption, AES-256-GCM + RSA-OAEP). */
export const encryptAssertion = (xml: string, algorithm: "gcm" | "cbc" = "gcm"): Promise<string> => {
  const document = new DOMParser().parseFromString(xml, "text/xml")
  const assertion = document.getElementsByTagNameNS(ns.assertion, "Assertion")[0]!
  const plaintext = new XMLSerializer().serializeToString(assertion)
  return new Promise((resolve, reject) =>
    xmlenc.encrypt(plaintext, {
      rsa_pub: publicKeyOf(spKeys.cert),
      pem: spKeys.cert,
      encryptionAlgorithm: algorithm === "gcm" ? "http://www.w3.org/2009/xmlenc11#aes256-gcm" : "http://www.w3.org/2001/04/xmlenc#aes256-cbc",
      keyEncryptionAlgorithm: "http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p"
    }, (error, encrypted) => {
      if (error) return reject(error)
      resolve(xml.replace(plaintext, `<saml:EncryptedAssertion>${encrypted}</saml:EncryptedAssertion>`))
    })
  )
}

/** A key transport for `encryptAssertionWith`: the xmlenc algorithm, its parameters, and the hashes they mean. */
export interface KeyTransport {
  readonly algorithm: "http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p" | "http://www.w3.org/2009/xmlenc11#rsa-oaep" | "http://www.w3.org/2001/04/xmlenc#rsa-1_5"
  /** The DigestMethod written (omitted when undefined: the SHA-1 default). */
  readonly digestMethod?: string
  /** The xmlenc11 MGF written (omitted when undefined: MGF1 with SHA-1). */
  readonly mgf?: string
  /** The node hash names the wrapping really uses. */
  readonly oaepHash: string
  readonly mgf1Hash: string
  /** An OAEP label, written as `xenc:OAEPparams`. */
  readonly label?: Buffer
}

const mgf1 = (hash: string, seed: Buffer, length: number): Buffer => {
  const blocks: Array<Buffer> = []
  for (let i = 0, produced = 0; produced < length; i++) {
    const counter = Buffer.alloc(4)
    counter.writeUInt32BE(i)
    blocks.push(createHash(hash).update(seed).update(counter).digest())
    produced += blocks.at(-1)!.length
  }
  return Buffer.concat(blocks).subarray(0, length)
}

/** RSA-OAEP (RFC 8017, 7.1.1) with separate digest and MGF1 hashes: EME-OAEP here, then raw RSA. */
export const oaepWrap = (cert: string, message: Buffer, oaepHash: string, mgf1Hash: string, label: Buffer = Buffer.alloc(0)): Buffer => {
  const key = createPublicKey(cert)
  const k = key.asymmetricKeyDetails!.modulusLength! / 8
  const lHash = createHash(oaepHash).update(label).digest()
  const hLen = lHash.length
  const db = Buffer.concat([lHash, Buffer.alloc(k - message.length - 2 * hLen - 2), Buffer.from([1]), message])
  const seed = randomBytes(hLen)
  const maskedDb = Buffer.from(db.map((byte, i) => byte ^ mgf1(mgf1Hash, seed, db.length)[i]!))
  const seedMask = mgf1(mgf1Hash, maskedDb, hLen)
  const maskedSeed = Buffer.from(seed.map((byte, i) => byte ^ seedMask[i]!))
  return publicEncrypt({ key, padding: constants.RSA_NO_PADDING }, Buffer.concat([Buffer.from([0]), maskedSeed, maskedDb]))
}

/**
 * Replaces the Assertion of a signed response by its encryption for the SP, built with
 * `node:crypto` alone: AES-256-GCM content, the key wrapped as `transport` says (so the key
 * transports of ADFS, Entra ID, Okta, Shibboleth and Keycloak can each be produced).
 */
export const encryptAssertionWith = (xml: string, transport: KeyTransport, recipient: KeyPair = spKeys): string => {
  const document = new DOMParser().parseFromString(xml, "text/xml")
  const assertion = document.getElementsByTagNameNS(ns.assertion, "Assertion")[0]!
  const plaintext = new XMLSerializer().serializeToString(assertion)
  const contentKey = randomBytes(32)
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", contentKey, iv)
  const content = Buffer.concat([iv, cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()])
  const wrapped = transport.algorithm === "http://www.w3.org/2001/04/xmlenc#rsa-1_5"
    ? publicEncrypt({ key: createPublicKey(recipient.cert), padding: constants.RSA_PKCS1_PADDING }, contentKey)
    : transport.oaepHash === transport.mgf1Hash
    ? publicEncrypt({
      key: createPublicKey(recipient.cert),
      padding: constants.RSA_PKCS1_OAEP_PADDING,
      oaepHash: transport.oaepHash,
      ...(transport.label === undefined ? {} : { oaepLabel: transport.label })
    }, contentKey)
    : oaepWrap(recipient.cert, contentKey, transport.oaepHash, transport.mgf1Hash, transport.label)
  const parameters = (transport.label === undefined ? "" : `<xenc:OAEPparams>${transport.label.toString("base64")}</xenc:OAEPparams>`) +
    (transport.digestMethod === undefined ? "" : `<ds:DigestMethod Algorithm="${transport.digestMethod}"/>`) +
    (transport.mgf === undefined ? "" : `<xenc11:MGF xmlns:xenc11="http://www.w3.org/2009/xmlenc11#" Algorithm="${transport.mgf}"/>`)
  const encrypted = `<saml:EncryptedAssertion><xenc:EncryptedData xmlns:xenc="http://www.w3.org/2001/04/xmlenc#" ` +
    `Type="http://www.w3.org/2001/04/xmlenc#Element"><xenc:EncryptionMethod Algorithm="http://www.w3.org/2009/xmlenc11#aes256-gcm"/>` +
    `<ds:KeyInfo xmlns:ds="${ns.dsig}"><xenc:EncryptedKey><xenc:EncryptionMethod Algorithm="${transport.algorithm}">${parameters}</xenc:EncryptionMethod>` +
    `<xenc:CipherData><xenc:CipherValue>${wrapped.toString("base64")}</xenc:CipherValue></xenc:CipherData></xenc:EncryptedKey></ds:KeyInfo>` +
    `<xenc:CipherData><xenc:CipherValue>${content.toString("base64")}</xenc:CipherValue></xenc:CipherData></xenc:EncryptedData></saml:EncryptedAssertion>`
  return xml.replace(plaintext, encrypted)
}

const publicKeyOf = (cert: string) => {
  // xml-encryption wants the RSA public key PEM next to the certificate.
  return new X509Certificate(cert).publicKey.export({ type: "spki", format: "pem" }).toString()
}

/** A response created and signed by samlify acting as the IdP (assertion and envelope signed). */
export const samlifyResponse = async (options: { readonly spMetadata: string; readonly inResponseTo: string; readonly email: string }) => {
  const idp = samlify.IdentityProvider({
    entityID: idpEntityId,
    privateKey: idpKeys.key,
    signingCert: idpKeys.cert,
    singleSignOnService: [{ Binding: "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect", Location: idpSsoUrl }],
    nameIDFormat: ["urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"]
  })
  const sp = samlify.ServiceProvider({ metadata: options.spMetadata, wantMessageSigned: true })
  const { context } = await idp.createLoginResponse(sp, { extract: { request: { id: options.inResponseTo } } }, "post", { email: options.email })
  return Buffer.from(context, "base64").toString("utf8")
}

/** A signed IdP LogoutRequest by the redirect binding: the raw query string. */
export const redirectLogoutRequest = (options: {
  readonly id: string
  readonly nameId: string
  readonly now: number
  readonly keys?: KeyPair
  readonly relayState?: string
  readonly signed?: boolean
}): string => {
  return redirectQuery("SAMLRequest", logoutRequestXml(options), options)
}

/** An IdP LogoutRequest naming `nameId` (and its session `_session1` unless told otherwise). */
export const logoutRequestXml = (options: { readonly id: string; readonly nameId: string; readonly now: number; readonly sessionIndex?: string }) =>
  `<samlp:LogoutRequest xmlns:samlp="${ns.protocol}" xmlns:saml="${ns.assertion}" ID="${options.id}" Version="2.0"` +
  ` IssueInstant="${iso(options.now)}" Destination="${sloUrl}"><saml:Issuer>${idpEntityId}</saml:Issuer>` +
  `<saml:NameID>${options.nameId}</saml:NameID><samlp:SessionIndex>${options.sessionIndex ?? "_session1"}</samlp:SessionIndex></samlp:LogoutRequest>`

/** A redirect-binding query carrying `xml`, signed (RSA-SHA256) unless `signed: false`. */
export const redirectQuery = (
  parameter: "SAMLRequest" | "SAMLResponse",
  xml: string,
  options: { readonly keys?: KeyPair; readonly relayState?: string; readonly signed?: boolean }
): string => {
  let query = `${parameter}=${encodeURIComponent(deflateRawSync(xml).toString("base64"))}`
  if (options.relayState !== undefined) query += `&RelayState=${encodeURIComponent(options.relayState)}`
  if (options.signed === false) return query
  query += `&SigAlg=${encodeURIComponent("http://www.w3.org/2001/04/xmldsig-more#rsa-sha256")}`
  const signature = createSign("sha256").update(query).sign((options.keys ?? idpKeys).key).toString("base64")
  return `${query}&Signature=${encodeURIComponent(signature)}`
}

/** A LogoutResponse the IdP sends back, answering `inResponseTo`. */
export const logoutResponseXml = (options: { readonly inResponseTo: string; readonly now: number }) =>
  `<samlp:LogoutResponse xmlns:samlp="${ns.protocol}" xmlns:saml="${ns.assertion}" ID="_lr1" Version="2.0" IssueInstant="${iso(options.now)}"` +
  ` Destination="${sloUrl}" InResponseTo="${options.inResponseTo}"><saml:Issuer>${idpEntityId}</saml:Issuer>` +
  `<samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status></samlp:LogoutResponse>`

/** A LogoutRequest for the POST binding, enveloped-signed by xml-crypto unless `signed: false`. */
export const postedLogoutRequest = (options: { readonly id: string; readonly nameId: string; readonly now: number; readonly keys?: KeyPair; readonly signed?: boolean }) => {
  const xml = `<samlp:LogoutRequest xmlns:samlp="${ns.protocol}" xmlns:saml="${ns.assertion}" ID="${options.id}" Version="2.0"` +
    ` IssueInstant="${iso(options.now)}" Destination="${sloUrl}"><saml:Issuer>${idpEntityId}</saml:Issuer>` +
    `<saml:NameID>${options.nameId}</saml:NameID></samlp:LogoutRequest>`
  if (options.signed === false) return xml
  const signer = new SignedXml({
    privateKey: (options.keys ?? idpKeys).key,
    signatureAlgorithm: "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
    canonicalizationAlgorithm: "http://www.w3.org/2001/10/xml-exc-c14n#"
  })
  signer.addReference({
    xpath: "/*[local-name(.)='LogoutRequest']",
    digestAlgorithm: "http://www.w3.org/2001/04/xmlenc#sha256",
    transforms: ["http://www.w3.org/2000/09/xmldsig#enveloped-signature", "http://www.w3.org/2001/10/xml-exc-c14n#"]
  })
  signer.computeSignature(xml, { prefix: "ds", location: { reference: "/*[local-name(.)='LogoutRequest']/*[local-name(.)='Issuer']", action: "after" } })
  return signer.getSignedXml()
}

/** Parses for test-side manipulation (attack variants). */
export const dom = (xml: string) => new DOMParser().parseFromString(xml, "text/xml")
/** Serialises a manipulated document. */
export const xmlOf = (node: Parameters<XMLSerializer["serializeToString"]>[0]) => new XMLSerializer().serializeToString(node)
export { ns }
