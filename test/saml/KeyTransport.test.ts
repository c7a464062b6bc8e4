/**
 * The key transports common IdPs use for encrypted assertions, each built with `node:crypto` in
 * the test (AES-256-GCM content, the content key wrapped as the IdP would) and decrypted by
 * `LoginResponse.validate` with the SP key (issue 18):
 *
 * - `rsa-oaep-mgf1p` with the default SHA-1 DigestMethod (ADFS, Entra ID, Okta's default),
 * - `rsa-oaep-mgf1p` with a SHA-256 DigestMethod, MGF1 staying SHA-1 as xmlenc 1.0 fixes it
 *   (Shibboleth, Keycloak, Okta with SHA-256: Java Santuario),
 * - xmlenc 1.1 `rsa-oaep` with an explicit MGF (Shibboleth 4+ defaults; MGF1-SHA-1 and MGF1-SHA-256),
 *   and with its defaults written out or left implicit.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { constants, createPrivateKey, privateDecrypt } from "node:crypto"
import * as Libraries from "../../src/saml/Libraries.js"
import * as LoginResponse from "../../src/saml/LoginResponse.js"
import * as Idp from "./support/Idp.js"

const now = Date.UTC(2026, 10, 23, 12)
const mgf1p = "http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p" as const
const rsaOaep = "http://www.w3.org/2009/xmlenc11#rsa-oaep" as const
const sha1 = "http://www.w3.org/2000/09/xmldsig#sha1"
const sha256 = "http://www.w3.org/2001/04/xmlenc#sha256"
const sha512 = "http://www.w3.org/2001/04/xmlenc#sha512"
const mgf1sha1 = "http://www.w3.org/2009/xmlenc11#mgf1sha1"
const mgf1sha256 = "http://www.w3.org/2009/xmlenc11#mgf1sha256"

const validate = (xml: string) =>
  Effect.flatMap(Libraries.load, (libraries) =>
    Effect.either(LoginResponse.validate(libraries, xml, Idp.expectations(now, { decryptionKey: createPrivateKey(Idp.spKeys.key) }))))

const encrypted = (transport: Idp.KeyTransport) =>
  Idp.encryptAssertionWith(Idp.validResponse({ now, inResponseTo: "_r", nameId: "alice@example.test" }), transport)

const accepted: ReadonlyArray<readonly [string, Idp.KeyTransport]> = [
  ["rsa-oaep-mgf1p, no DigestMethod (SHA-1)", { algorithm: mgf1p, oaepHash: "sha1", mgf1Hash: "sha1" }],
  ["rsa-oaep-mgf1p, SHA-1 DigestMethod (ADFS, Entra ID)", { algorithm: mgf1p, digestMethod: sha1, oaepHash: "sha1", mgf1Hash: "sha1" }],
  ["rsa-oaep-mgf1p, SHA-256 DigestMethod, MGF1-SHA-1 (Shibboleth, Keycloak, Okta)", { algorithm: mgf1p, digestMethod: sha256, oaepHash: "sha256", mgf1Hash: "sha1" }],
  ["rsa-oaep-mgf1p, SHA-512 DigestMethod, MGF1-SHA-1", { algorithm: mgf1p, digestMethod: sha512, oaepHash: "sha512", mgf1Hash: "sha1" }],
  ["xmlenc11 rsa-oaep, SHA-256 digest, explicit MGF1-SHA-1 (Shibboleth 4+)", { algorithm: rsaOaep, digestMethod: sha256, mgf: mgf1sha1, oaepHash: "sha256", mgf1Hash: "sha1" }],
  ["xmlenc11 rsa-oaep, SHA-256 digest, explicit MGF1-SHA-256", { algorithm: rsaOaep, digestMethod: sha256, mgf: mgf1sha256, oaepHash: "sha256", mgf1Hash: "sha256" }],
  ["xmlenc11 rsa-oaep, SHA-1 digest, explicit MGF1-SHA-256", { algorithm: rsaOaep, digestMethod: sha1, mgf: mgf1sha256, oaepHash: "sha1", mgf1Hash: "sha256" }],
  ["xmlenc11 rsa-oaep, defaults implicit (SHA-1, MGF1-SHA-1)", { algorithm: rsaOaep, oaepHash: "sha1", mgf1Hash: "sha1" }],
  ["rsa-oaep-mgf1p with OAEPparams (a label), SHA-1", { algorithm: mgf1p, oaepHash: "sha1", mgf1Hash: "sha1", label: Buffer.from("fw-label") }],
  ["rsa-oaep-mgf1p with OAEPparams (a label), SHA-256 digest, MGF1-SHA-1", {
    algorithm: mgf1p,
    digestMethod: sha256,
    oaepHash: "sha256",
    mgf1Hash: "sha1",
    label: Buffer.from("fw-label")
  }]
]

describe("SAML encrypted assertions: the key transports IdPs send", () => {
  for (const [name, transport] of accepted) {
    it.effect(`${name} is decrypted`, () =>
      Effect.gen(function*() {
        const result = yield* validate(encrypted(transport))
        assert.isTrue(Either.isRight(result), JSON.stringify(Either.isLeft(result) ? result.left : null))
        assert.strictEqual(Either.getOrThrow(result).profile.nameId, "alice@example.test")
      }))
  }

  it("the test's own OAEP encoder is right: node:crypto decrypts what it wraps when one hash serves both roles", () => {
    const message = Buffer.alloc(32, 7)
    for (const hash of ["sha1", "sha256"]) {
      const wrapped = Idp.oaepWrap(Idp.spKeys.cert, message, hash, hash)
      assert.deepStrictEqual(privateDecrypt({ key: Idp.spKeys.key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: hash }, wrapped), message)
    }
  })

  it.effect("a wrapping that does not match its declared parameters, RSA 1.5, or an unknown MGF get the one decryption answer", () =>
    Effect.gen(function*() {
      const refusals: ReadonlyArray<Idp.KeyTransport> = [
        // Declared mgf1p + SHA-256, wrapped with SHA-256 for MGF1 as well (not what mgf1p means).
        { algorithm: mgf1p, digestMethod: sha256, oaepHash: "sha256", mgf1Hash: "sha256" },
        { algorithm: rsaOaep, digestMethod: sha256, mgf: mgf1sha1, oaepHash: "sha256", mgf1Hash: "sha256" },
        { algorithm: rsaOaep, digestMethod: sha256, mgf: "http://www.w3.org/2009/xmlenc11#mgf1sha224", oaepHash: "sha256", mgf1Hash: "sha224" },
        { algorithm: "http://www.w3.org/2001/04/xmlenc#rsa-1_5", oaepHash: "sha1", mgf1Hash: "sha1" }
      ]
      for (const transport of refusals) {
        const result = yield* validate(encrypted(transport))
        assert.isTrue(Either.isLeft(result) && result.left.reason === "decryption", `${JSON.stringify(transport)}: ${JSON.stringify(result)}`)
      }
    }))
})
