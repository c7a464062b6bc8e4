/**
 * Decryption of `<saml:EncryptedAssertion>` with the SP's `decryptionPvk` (XML Encryption: an
 * RSA-OAEP wrapped key, `rsa-oaep-mgf1p` or xmlenc 1.1 `rsa-oaep` with SHA-1 or SHA-2 digests and
 * MGF1 hashes; AES-GCM content), done with `node:crypto`. The plaintext is parsed as
 * strictly as the message and takes the encrypted element's place, so the very same validation
 * then runs over it.
 *
 * The ciphertext must be authenticated before it is decrypted: AES-CBC without integrity lets
 * whoever holds a captured response decrypt it through the SP's answers (Jager & Somorovsky, "How
 * to break XML Encryption", 2011). AES-GCM authenticates itself; AES-CBC is decrypted only when the
 * caller has verified a signature covering the ciphertext (the response envelope's). RSA 1.5 and
 * triple-DES are refused, and every failure from here on is one indistinguishable answer.
 */
import { Either } from "effect"
import { type CipherGCMTypes, constants, createDecipheriv, createHash, type KeyObject, privateDecrypt, timingSafeEqual } from "node:crypto"
import { reject, type SamlRejected } from "./Errors.js"
import type * as Libraries from "./Libraries.js"
import * as Xml from "./Xml.js"

const xenc11 = "http://www.w3.org/2009/xmlenc11#"

type ContentCipher =
  | { readonly mode: "gcm"; readonly cipher: CipherGCMTypes }
  | { readonly mode: "cbc"; readonly cipher: string }

const contentCiphers: Readonly<Record<string, ContentCipher>> = {
  "http://www.w3.org/2009/xmlenc11#aes128-gcm": { mode: "gcm", cipher: "aes-128-gcm" },
  "http://www.w3.org/2009/xmlenc11#aes192-gcm": { mode: "gcm", cipher: "aes-192-gcm" },
  "http://www.w3.org/2009/xmlenc11#aes256-gcm": { mode: "gcm", cipher: "aes-256-gcm" },
  "http://www.w3.org/2001/04/xmlenc#aes128-cbc": { mode: "cbc", cipher: "aes-128-cbc" },
  "http://www.w3.org/2001/04/xmlenc#aes192-cbc": { mode: "cbc", cipher: "aes-192-cbc" },
  "http://www.w3.org/2001/04/xmlenc#aes256-cbc": { mode: "cbc", cipher: "aes-256-cbc" }
}

const contentAlgorithm = (encrypted: Element) =>
  Xml.only(Xml.only(encrypted, Xml.ns.xenc, "EncryptedData") ?? encrypted, Xml.ns.xenc, "EncryptionMethod")?.getAttribute("Algorithm") ?? ""

/** Whether decrypting `encrypted` needs a signature over its ciphertext first (its cipher has no integrity). */
export const needsAuthenticatedCiphertext = (encrypted: Element): boolean => contentCiphers[contentAlgorithm(encrypted)]?.mode !== "gcm"

const digests: Readonly<Record<string, string>> = {
  "http://www.w3.org/2000/09/xmldsig#sha1": "sha1",
  "http://www.w3.org/2001/04/xmlenc#sha256": "sha256",
  "http://www.w3.org/2001/04/xmldsig-more#sha384": "sha384",
  "http://www.w3.org/2001/04/xmlenc#sha512": "sha512"
}

const mgfs: Readonly<Record<string, string>> = {
  [`${xenc11}mgf1sha1`]: "sha1",
  [`${xenc11}mgf1sha256`]: "sha256",
  [`${xenc11}mgf1sha384`]: "sha384",
  [`${xenc11}mgf1sha512`]: "sha512"
}

const cipherValue = (parent: Element): Buffer | undefined => {
  const value = Xml.only(Xml.only(parent, Xml.ns.xenc, "CipherData") ?? parent, Xml.ns.xenc, "CipherValue")
  return value === undefined ? undefined : Buffer.from((value.textContent ?? "").replace(/\s+/g, ""), "base64")
}

// One answer for every failure: which step failed must not be observable from outside. The
// argument names the step for the reader of this file; it is deliberately not reported.
const undecryptable = reject("decryption", "the encrypted assertion could not be decrypted")
const failed = (_step: string) => Either.left(undecryptable)

const mgf1p = "http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p"
const sha1 = "http://www.w3.org/2000/09/xmldsig#sha1"

/**
 * The (digest, MGF1 hash) of a key transport element. `rsa-oaep-mgf1p` fixes MGF1 to SHA-1
 * whatever its DigestMethod (xmlenc 1.0, 5.4.2; what Java's Santuario, hence Shibboleth, Keycloak
 * and Okta, sends with a SHA-256 digest; ADFS and Entra ID send SHA-1). xmlenc 1.1 `rsa-oaep`
 * names its MGF (default MGF1 with SHA-1). Both digests default to SHA-1.
 */
const oaepParameters = (method: Element): readonly [string, string] | undefined => {
  const algorithm = method.getAttribute("Algorithm") ?? ""
  const digest = digests[Xml.only(method, Xml.ns.dsig, "DigestMethod")?.getAttribute("Algorithm") ?? sha1]
  if (digest === undefined) return undefined
  if (algorithm === mgf1p) return [digest, "sha1"]
  if (algorithm !== `${xenc11}rsa-oaep`) return undefined
  const mgf = mgfs[Xml.only(method, xenc11, "MGF")?.getAttribute("Algorithm") ?? `${xenc11}mgf1sha1`]
  return mgf === undefined ? undefined : [digest, mgf]
}

/** MGF1 (RFC 8017, B.2.1) over `seed`, `length` octets. */
const mgf1 = (hash: string, seed: Buffer, length: number): Buffer => {
  const blocks: Array<Buffer> = []
  const counter = Buffer.alloc(4)
  for (let produced = 0, i = 0; produced < length; i++) {
    counter.writeUInt32BE(i)
    const block = createHash(hash).update(seed).update(counter).digest()
    blocks.push(block)
    produced += block.length
  }
  return Buffer.concat(blocks).subarray(0, length)
}

/**
 * EME-OAEP decoding (RFC 8017, 7.1.2 step 3) of the raw RSA result `encoded`, for a digest and an
 * MGF1 hash that differ (`node:crypto` takes one hash for both). Every check is made before the
 * one verdict, so no step is distinguishable by its answer (Manger's attack needs that).
 */
const oaepDecode = (encoded: Buffer, digest: string, mgfHash: string, label: Buffer): Buffer | undefined => {
  const lHash = createHash(digest).update(label).digest()
  const hLen = lHash.length
  if (encoded.length < 2 * hLen + 2) return undefined
  const maskedSeed = encoded.subarray(1, 1 + hLen)
  const maskedDb = encoded.subarray(1 + hLen)
  const seedMask = mgf1(mgfHash, maskedDb, hLen)
  const seed = Buffer.alloc(hLen)
  for (let i = 0; i < hLen; i++) seed[i] = maskedSeed[i]! ^ seedMask[i]!
  const dbMask = mgf1(mgfHash, seed, maskedDb.length)
  const db = Buffer.alloc(maskedDb.length)
  for (let i = 0; i < db.length; i++) db[i] = maskedDb[i]! ^ dbMask[i]!
  let bad = encoded[0]! | (timingSafeEqual(db.subarray(0, hLen), lHash) ? 0 : 1)
  let separator = 0
  for (let i = hLen; i < db.length; i++) {
    const unseen = separator === 0 ? 1 : 0
    if (unseen === 1 && db[i] === 1) separator = i
    else bad |= unseen & (db[i] === 0 ? 0 : 1)
  }
  return bad !== 0 || separator === 0 ? undefined : db.subarray(separator + 1)
}

/** The content key, unwrapped with RSA-OAEP (`node:crypto` when one hash serves both roles, else `oaepDecode`). */
const unwrapKey = (encryptedKey: Element, key: KeyObject): Either.Either<Buffer, SamlRejected> => {
  const method = Xml.only(encryptedKey, Xml.ns.xenc, "EncryptionMethod")
  const parameters = method === undefined ? undefined : oaepParameters(method)
  if (method === undefined || parameters === undefined) return failed("the key transport algorithm or its parameters are not allowed")
  const [digest, mgfHash] = parameters
  const wrapped = cipherValue(encryptedKey)
  if (wrapped === undefined) return failed("the wrapped key is missing")
  const params = Xml.only(method, Xml.ns.xenc, "OAEPparams")
  const label = params === undefined ? Buffer.alloc(0) : Buffer.from((params.textContent ?? "").replace(/\s+/g, ""), "base64")
  try {
    const unwrapped = digest === mgfHash
      ? privateDecrypt({ key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: digest, ...(label.length > 0 ? { oaepLabel: label } : {}) }, wrapped)
      : oaepDecode(privateDecrypt({ key, padding: constants.RSA_NO_PADDING }, wrapped), digest, mgfHash, label)
    return unwrapped === undefined ? failed("the content key does not decode") : Either.right(unwrapped)
  } catch {
    return failed("the content key does not decrypt with the SP key")
  }
}

const decryptContent = (
  algorithm: string,
  contentKey: Buffer,
  data: Buffer,
  ciphertextAuthenticated: boolean
): Either.Either<string, SamlRejected> => {
  const spec = contentCiphers[algorithm]
  if (spec === undefined) return failed("the content encryption algorithm is not allowed")
  if (spec.mode === "cbc" && !ciphertextAuthenticated) return failed("AES-CBC without a verified signature over the ciphertext")
  try {
    if (spec.mode === "gcm") {
      const decipher = createDecipheriv(spec.cipher, contentKey, data.subarray(0, 12), { authTagLength: 16 })
      decipher.setAuthTag(data.subarray(data.length - 16))
      return Either.right(Buffer.concat([decipher.update(data.subarray(12, data.length - 16)), decipher.final()]).toString("utf8"))
    }
    const decipher = createDecipheriv(spec.cipher, contentKey, data.subarray(0, 16)).setAutoPadding(false)
    const plain = Buffer.concat([decipher.update(data.subarray(16)), decipher.final()])
    // XML Encryption padding: the last octet counts the padding octets, whose values are arbitrary.
    const padding = plain[plain.length - 1] ?? 0
    if (padding < 1 || padding > 16) return failed("bad padding")
    return Either.right(plain.subarray(0, plain.length - padding).toString("utf8"))
  } catch {
    return failed("the assertion does not decrypt (or was altered)")
  }
}

// Prefixes an encrypted assertion may use without declaring them (they were in scope in the
// response it was cut from). Exclusive canonicalization renders only the namespaces an element
// uses, so the wrapper does not change what the signature covers.
const wrapperOpen = `<fw-plaintext xmlns:saml="${Xml.ns.assertion}" xmlns:samlp="${Xml.ns.protocol}" xmlns:ds="${Xml.ns.dsig}" ` +
  `xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`

/**
 * Replaces `encrypted` (an EncryptedAssertion in `document`) with its decrypted Assertion.
 * `ciphertextAuthenticated`: a signature covering the ciphertext has been verified (required for CBC).
 */
export const decryptAssertion = (
  libraries: Libraries.Libraries,
  document: Document,
  encrypted: Element,
  key: KeyObject,
  ciphertextAuthenticated: boolean
): Either.Either<void, SamlRejected> => {
  const data = Xml.only(encrypted, Xml.ns.xenc, "EncryptedData")
  if (data === undefined) return failed("EncryptedAssertion needs exactly one EncryptedData")
  const keyInfo = Xml.only(data, Xml.ns.dsig, "KeyInfo")
  const encryptedKey = (keyInfo && Xml.only(keyInfo, Xml.ns.xenc, "EncryptedKey")) ?? Xml.only(encrypted, Xml.ns.xenc, "EncryptedKey")
  const content = cipherValue(data)
  if (encryptedKey === undefined || content === undefined) return failed("the encrypted key or content is missing")
  return unwrapKey(encryptedKey, key).pipe(
    Either.flatMap((contentKey) => decryptContent(contentAlgorithm(encrypted), contentKey, content, ciphertextAuthenticated)),
    Either.flatMap((plaintext) =>
      Either.mapLeft(
        Xml.parse(libraries, `${wrapperOpen}${plaintext.replace(/^<\?xml[^>]*\?>/, "")}</fw-plaintext>`),
        () => undecryptable
      )),
    Either.flatMap((wrapper) => {
      const root = wrapper.documentElement!
      const elements = Array.from(root.childNodes).filter((node) => node.nodeType === 1)
      const assertion = elements[0]
      if (elements.length !== 1 || !Xml.is(assertion ?? null, Xml.ns.assertion, "Assertion")) {
        return failed("the plaintext is not exactly one Assertion")
      }
      encrypted.parentNode!.replaceChild(document.importNode(assertion!, true), encrypted)
      return Either.right(undefined)
    })
  )
}
