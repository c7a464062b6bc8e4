/**
 * Algorithms and key types on the JWKS path: PS256 and EdDSA verify when allowed, a key serves only
 * the algorithms its type (and its JWK) allow, and signatures or encodings that are not exactly
 * right fail. Tokens are signed with node:crypto, so keys jose refuses to sign with (RSA under 2048
 * bits) and malformed signatures can be made too.
 */
import { assert, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import type * as jose from "jose"
import { constants, generateKeyPairSync, type KeyObject, sign } from "node:crypto"
import type * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { jwtBearerStrategy } from "../../src/auth/IdentityProviders.js"
import * as Idp from "./support/Idp.js"
import { authenticate, bearer, expectFailed, expectSubject } from "./support/Verdicts.js"

const issuer = "https://idp.test"
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

interface TestKey extends Idp.PublishedKey {
  readonly kid: string
  readonly privateKey: KeyObject
}

const published = (kid: string, privateKey: KeyObject, jwk: jose.JWK = {}): TestKey => ({
  kid,
  privateKey,
  privateJwk: { ...privateKey.export({ format: "jwk" }), kid, use: "sig", ...jwk }
})

/** A compact JWS over `body`, signed with `key` as `alg` says (`signAs` signs as another algorithm). */
const mint = (
  key: TestKey,
  alg: string,
  options: { readonly body?: unknown; readonly header?: Record<string, unknown>; readonly signAs?: string } = {}
) => {
  const body = options.body ?? { sub: "u", iss: issuer, aud: "api", tid: "t", exp: Idp.nowSeconds() + 3600 }
  const input = Buffer.from(`${b64({ alg, kid: key.kid, typ: "JWT", ...options.header })}.${b64(body)}`)
  const signature = (() => {
    switch (options.signAs ?? alg) {
      case "EdDSA":
        return sign(null, input, key.privateKey)
      case "PS256":
        return sign("sha256", input, { key: key.privateKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 })
      case "ES256":
        return sign("sha256", input, { key: key.privateKey, dsaEncoding: "ieee-p1363" })
      default: // RS256, and "ES256-DER": ECDSA in Node's default DER encoding
        return sign("sha256", input, key.privateKey)
    }
  })()
  return `${input.toString()}.${signature.toString("base64url")}`
}

const withSignature = (token: string, change: (signature: Buffer) => Buffer) => {
  const [header, payload, signature] = token.split(".") as [string, string, string]
  return `${header}.${payload}.${change(Buffer.from(signature, "base64url")).toString("base64url")}`
}

class Fixture extends Context.Tag("test/Algorithms")<Fixture, {
  readonly strategy: AuthStrategy.AuthStrategy
  readonly keys: Readonly<Record<"rsa" | "ec" | "ed" | "rsOnly" | "weak" | "p384" | "enc", TestKey>>
}>() {}

const FixtureLive = Layer.scoped(
  Fixture,
  Effect.gen(function*() {
    const keys = {
      rsa: published("rsa", generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey),
      ec: published("ec", generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey),
      ed: published("ed", generateKeyPairSync("ed25519").privateKey),
      rsOnly: published("rs-only", generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey, { alg: "RS256" }),
      weak: published("weak", generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey),
      p384: published("p384", generateKeyPairSync("ec", { namedCurve: "P-384" }).privateKey),
      enc: published("enc", generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey, { use: "enc" })
    }
    const server = yield* Idp.jwksServer(Object.values(keys))
    const strategy = jwtBearerStrategy({
      id: "j",
      jwksUrl: server.url,
      issuer,
      audience: "api",
      algorithms: ["RS256", "ES256", "PS256", "EdDSA"],
      tenantIdFromClaims: (claims) => typeof claims.tid === "string" ? claims.tid : null
    })
    return { strategy, keys }
  })
)

layer(FixtureLive, { timeout: 30_000, excludeTestServices: true })("JWT algorithms and key types", (it) => {
  it.effect("accepts RS256, PS256, ES256 and EdDSA from keys of the matching type", () =>
    Effect.gen(function*() {
      const { keys, strategy } = yield* Fixture
      for (const token of [mint(keys.rsa, "RS256"), mint(keys.rsa, "PS256"), mint(keys.ec, "ES256"), mint(keys.ed, "EdDSA"), mint(keys.rsOnly, "RS256")]) {
        expectSubject(yield* authenticate(strategy, bearer(token)), "t", "j")
      }
    }))

  it.effect("a key serves only the algorithms its type and its JWK allow", () =>
    Effect.gen(function*() {
      const { keys, strategy } = yield* Fixture
      const refused = {
        "PS256 on a key whose JWK pins RS256": mint(keys.rsOnly, "PS256"),
        "RSA under 2048 bits": mint(keys.weak, "RS256"),
        "ES256 from a P-384 key": mint(keys.p384, "ES256", { signAs: "ES256-DER" }),
        "EdDSA header naming the RSA key": mint(keys.ed, "EdDSA", { header: { kid: "rsa" } }),
        "RS256 header naming the Ed25519 key": mint(keys.rsa, "RS256", { header: { kid: "ed" } }),
        "ES256 header naming the RSA key": mint(keys.ec, "ES256", { header: { kid: "rsa" } }),
        "a key published for encryption": mint(keys.enc, "RS256")
      }
      for (const [name, token] of Object.entries(refused)) {
        const verdict = yield* authenticate(strategy, bearer(token))
        assert.isTrue(verdict._tag === "Failed" && verdict.reason.includes("ERR_JWKS_NO_MATCHING_KEY"), `${name}: ${JSON.stringify(verdict)}`)
      }
    }))

  it.effect("refuses signatures that are not exactly right", () =>
    Effect.gen(function*() {
      const { keys, strategy } = yield* Fixture
      const rs = mint(keys.rsa, "RS256")
      const refused = {
        "PS256 header over a PKCS#1 v1.5 signature": mint(keys.rsa, "PS256", { signAs: "RS256" }),
        "RS256 header over a PSS signature": mint(keys.rsa, "RS256", { signAs: "PS256" }),
        "ES256 signature in DER, not IEEE P1363": mint(keys.ec, "ES256", { signAs: "ES256-DER" }),
        "RSA signature one byte short": withSignature(rs, (signature) => signature.subarray(1)),
        "RSA signature one byte long": withSignature(rs, (signature) => Buffer.concat([Buffer.of(0), signature])),
        "ES256 signature one byte long": withSignature(mint(keys.ec, "ES256"), (signature) => Buffer.concat([signature, Buffer.of(0)])),
        "EdDSA signature flipped": withSignature(mint(keys.ed, "EdDSA"), (signature) => Buffer.from(signature.map((byte, i) => i === 0 ? byte ^ 1 : byte)))
      }
      for (const [name, token] of Object.entries(refused)) {
        const verdict = yield* authenticate(strategy, bearer(token))
        assert.isTrue(verdict._tag === "Failed" && verdict.reason.includes("ERR_JWS_SIGNATURE_VERIFICATION_FAILED"), `${name}: ${JSON.stringify(verdict)}`)
      }
    }))

  it.effect("refuses encodings and headers it does not read strictly", () =>
    Effect.gen(function*() {
      const { keys, strategy } = yield* Fixture
      const good = mint(keys.rsa, "RS256")
      // A 256-byte signature ends in a character with 4 unused bits: setting one decodes to the same bytes.
      const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
      const strayBits = `${good.slice(0, -1)}${alphabet[alphabet.indexOf(good.at(-1)!) ^ 1]}`
      assert.deepStrictEqual(Buffer.from(strayBits.split(".")[2]!, "base64url"), Buffer.from(good.split(".")[2]!, "base64url"))
      const cases: ReadonlyArray<readonly [string, string]> = [
        [strayBits, "ERR_JWS_INVALID"],
        [`${good}==`, "ERR_JWS_INVALID"],
        // Buffer's base64url decoder also takes the base64 alphabet.
        [`${good.slice(0, -2)}+/`, "ERR_JWS_INVALID"],
        [mint(keys.rsa, "RS256", { header: { kid: 1 } }), "ERR_JWS_INVALID"],
        [mint(keys.rsa, "RS256", { header: { crit: ["exp"], exp: 1 } }), "ERR_JOSE_NOT_SUPPORTED"],
        [mint(keys.rsa, "RS256", { header: { b64: false } }), "ERR_JWT_INVALID"],
        [mint(keys.rsa, "RS256", { body: ["not", "an", "object"] }), "ERR_JWT_INVALID"],
        [mint(keys.rsa, "RS256", { body: { sub: "u", iss: issuer, aud: "api", tid: "t", exp: "never" } }), "ERR_JWT_CLAIM_VALIDATION_FAILED (exp)"]
      ]
      for (const [token, because] of cases) expectFailed(yield* authenticate(strategy, bearer(token)), because)
    }))

  it.scoped("a tenant mapping that throws fails that request's verdict; the process carries on", () =>
    Effect.gen(function*() {
      const { keys } = yield* Fixture
      const server = yield* Idp.jwksServer([keys.rsa])
      const strategy = jwtBearerStrategy({
        id: "j",
        jwksUrl: server.url,
        issuer,
        audience: "api",
        tenantIdFromClaims: (claims) => (claims.o as { id: string }).id
      })
      expectFailed(yield* authenticate(strategy, bearer(mint(keys.rsa, "RS256"))), "ERR_JWT_CLAIM_MAPPING_FAILED")
      expectFailed(yield* authenticate(strategy, bearer(mint(keys.rsa, "RS256"))), "ERR_JWT_CLAIM_MAPPING_FAILED")
    }))

  it.effect("a clock tolerance that is not a finite number ≥ 0 is refused at construction", () =>
    Effect.sync(() => {
      for (const clockToleranceSeconds of [Number.NaN, -1, Number.POSITIVE_INFINITY, "5" as unknown as number]) {
        assert.throws(
          () => jwtBearerStrategy({
            id: "j",
            jwksUrl: "https://idp.test/jwks",
            issuer,
            audience: "api",
            clockToleranceSeconds,
            tenantIdFromClaims: () => "t"
          }),
          /clockToleranceSeconds/
        )
      }
    }))
})
