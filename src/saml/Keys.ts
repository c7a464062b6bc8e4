/**
 * Keys of a SAML deployment: the IdP's trusted signing certificates (PEM, or the bare base64 body
 * metadata and the spec's `idpCert` carry) and the SP's private key. Verification uses only these,
 * never a certificate a message carries in `<KeyInfo>`.
 */
import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto"
import { SamlConfigInvalid } from "./Errors.js"

/** A trusted IdP signing key. */
export interface TrustedKey {
  readonly certificate: string
  readonly publicKey: KeyObject
  /** WebCrypto imports per signature algorithm, made on first use. */
  readonly imported: Map<string, Promise<CryptoKey>>
}

/** The base64 body of a certificate, whitespace and PEM armour removed. */
export const certificateBody = (certificate: string): string =>
  certificate.replace(/-----(BEGIN|END) CERTIFICATE-----/g, "").replace(/\s+/g, "")

const pem = (body: string) => `-----BEGIN CERTIFICATE-----\n${body.match(/.{1,64}/g)?.join("\n") ?? ""}\n-----END CERTIFICATE-----\n`

/** Reads a certificate; throws `SamlConfigInvalid` for one that does not parse or an RSA key under 2048 bits. */
export const trust = (certificate: string): TrustedKey => {
  const body = certificateBody(certificate)
  let publicKey: KeyObject
  try {
    publicKey = new X509Certificate(pem(body)).publicKey
  } catch {
    throw new SamlConfigInvalid({ reason: "an IdP certificate does not parse" })
  }
  const bits = publicKey.asymmetricKeyDetails?.modulusLength
  if (publicKey.asymmetricKeyType === "rsa" && (bits === undefined || bits < 2048)) {
    throw new SamlConfigInvalid({ reason: `an IdP RSA key has ${bits} bits; at least 2048 are required` })
  }
  return { certificate: body, publicKey, imported: new Map() }
}

/** The SP's private key; throws `SamlConfigInvalid` when it does not parse. */
export const privateKey = (option: string, name: string): KeyObject => {
  try {
    return createPrivateKey(option)
  } catch {
    throw new SamlConfigInvalid({ reason: `${name} is not a PEM private key` })
  }
}

/** The WebCrypto curve name of an EC key (`P-256`, `P-384`), undefined for other keys. */
export const namedCurve = (key: KeyObject): string | undefined => {
  const curve = key.asymmetricKeyDetails?.namedCurve
  return curve === "prime256v1" ? "P-256" : curve === "secp384r1" ? "P-384" : curve === "secp521r1" ? "P-521" : undefined
}
