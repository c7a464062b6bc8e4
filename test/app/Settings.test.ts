import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { defineApp } from "../../src/app/App.js"
import * as Settings from "../../src/app/Settings.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import * as Jwks from "../../src/auth/Jwks.js"
import { SessionSecretTooShort } from "../../src/auth/Errors.js"
import { passwordSessionStrategy } from "../../src/auth/Session.js"
import { rowHistoryPlugin } from "../../src/history/RowHistory.js"
import { samlSsoPlugin } from "../../src/saml/SamlSsoPlugin.js"
import * as Sp from "../saml/support/Sp.js"
import { app } from "./fixtures.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const fromEnv = (env: Record<string, string>, name: string, fallback: number) =>
  Settings.positiveIntegerFromEnv(name, fallback).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("numbers from the environment and from options", () => {
  it.effect("unset or empty means the default; a positive integer is taken as is", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* fromEnv({}, "PORT", 3000), 3000)
      assert.strictEqual(yield* fromEnv({ PORT: "" }, "PORT", 3000), 3000)
      assert.strictEqual(yield* fromEnv({ PORT: "  " }, "PORT", 3000), 3000)
      assert.strictEqual(yield* fromEnv({ PORT: "8080" }, "PORT", 3000), 8080)
    }))

  it.effect("anything else stops with an error naming the variable", () =>
    Effect.gen(function*() {
      for (const value of ["0", "-5", "1.5", "12abc", "abc", "1e3", "0x10", "99999999999999999999"]) {
        const error = yield* Effect.flip(fromEnv({ FW_MAX_BODY_BYTES: value }, "FW_MAX_BODY_BYTES", 1))
        assert.strictEqual(error._tag, "SettingInvalid", value)
        assert.include(error.message, "FW_MAX_BODY_BYTES", value)
      }
    }))

  it.scopedLive("an empty FW_MAX_BODY_BYTES is unset: bodies under the default cap are served", () =>
    Effect.gen(function*() {
      process.env.FW_MAX_BODY_BYTES = ""
      const served = yield* Serve.serve(app, memory).pipe(Effect.ensuring(Effect.sync(() => delete process.env.FW_MAX_BODY_BYTES)))
      const body = JSON.stringify({ _tag: "Request", id: "1", tag: "notes.list", payload: {}, headers: [] })
      const response = yield* Effect.promise(() => fetch(served.rpcUrl, { method: "POST", body, headers: { "content-type": "application/json" } }))
      assert.strictEqual(response.status, 200)
    }))

  it.scopedLive("a FW_MAX_BODY_BYTES that is not a positive integer stops the boot, naming the variable", () =>
    Effect.gen(function*() {
      process.env.FW_MAX_BODY_BYTES = "-1"
      const error = yield* Effect.flip(Serve.serve(app, memory)).pipe(Effect.ensuring(Effect.sync(() => delete process.env.FW_MAX_BODY_BYTES)))
      assert.include(String((error as { readonly message?: unknown }).message), "FW_MAX_BODY_BYTES")
    }))

  it("an app option that is not a positive integer is refused at definition, naming the option", () => {
    for (const maxBodyBytes of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => defineApp({ http: { maxBodyBytes } }), /http\.maxBodyBytes must be a positive integer/)
    }
    assert.strictEqual(defineApp({ http: { maxBodyBytes: 1024 } }).maxBodyBytes, 1024)
  })

  it("numeric options of the areas are refused when they are not integers in range, naming the option", () => {
    assert.throws(() => defineApp({ idempotency: { ttlMs: 1.5 } }), /idempotency\.ttlMs must be a positive integer/)
    assert.throws(() => Jwks.resolve({ cooldownMs: -1 }), /jwks\.cooldownMs must be a non-negative integer/)
    assert.throws(() => Jwks.resolve({ timeoutMs: Number.NaN }), /jwks\.timeoutMs must be a positive integer/)
    assert.throws(() => samlSsoPlugin({ ...Sp.baseOptions, acceptedClockSkewMs: -5 }), /acceptedClockSkewMs must be a non-negative integer/)
    assert.throws(
      () => samlSsoPlugin({ ...Sp.baseOptions, idp: { ...Sp.baseOptions.idp, metadataRefreshMs: 0.5 } }),
      /idp\.metadataRefreshMs must be a non-negative integer/
    )
    assert.throws(() => rowHistoryPlugin({ keepVersions: 0 }), /rowHistoryPlugin\.keepVersions must be a positive integer/)
    assert.throws(() => rowHistoryPlugin({ batchSize: -3 }), /rowHistoryPlugin\.batchSize must be a positive integer/)
    // 0 keeps its meaning where it has one: no skew, metadata refresh off.
    assert.doesNotThrow(() => samlSsoPlugin({ ...Sp.baseOptions, acceptedClockSkewMs: 0, idp: { ...Sp.baseOptions.idp, metadataRefreshMs: 0 } }))
  })
})

describe("configuration read where the app is declared", () => {
  const withEnv = <A>(env: Record<string, string | undefined>, read: () => A): A => {
    const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]))
    for (const [name, value] of Object.entries(env)) value === undefined ? delete process.env[name] : process.env[name] = value
    try {
      return read()
    } finally {
      for (const [name, value] of Object.entries(saved)) value === undefined ? delete process.env[name] : process.env[name] = value
    }
  }
  const refusal = (env: Record<string, string | undefined>, read: () => unknown): string => {
    try {
      withEnv(env, read)
    } catch (error) {
      assert.instanceOf(error, Settings.SettingInvalid)
      // One line, naming the variable: what a user sees at boot.
      assert.notInclude(String((error as Error).stack), "\n")
      return (error as Error).message
    }
    return assert.fail("expected SettingInvalid")
  }

  it("a missing, empty or short secret names the variable and never echoes the value", () => {
    assert.match(refusal({ SESSION_SECRET: undefined }, () => Settings.secretFromEnv("SESSION_SECRET")), /^SESSION_SECRET must be set to a secret of at least 32 bytes/)
    assert.match(refusal({ SESSION_SECRET: "  " }, () => Settings.secretFromEnv("SESSION_SECRET")), /^SESSION_SECRET must be set/)
    const short = refusal({ SESSION_SECRET: "hunter2" }, () => Settings.secretFromEnv("SESSION_SECRET"))
    assert.strictEqual(short, "SESSION_SECRET must be a secret of at least 32 bytes (it has 7)")
    assert.strictEqual(withEnv({ SESSION_SECRET: "x".repeat(32) }, () => Settings.secretFromEnv("SESSION_SECRET")), "x".repeat(32))
  })

  it("URLs: unset without a fallback, unparsable, or of another scheme name the variable", () => {
    assert.match(refusal({ DATABASE_URL: undefined }, () => Settings.urlFromEnv("DATABASE_URL")), /^DATABASE_URL must be set to an absolute URL/)
    assert.match(refusal({ DATABASE_URL: "localhost:5432" }, () => Settings.urlFromEnv("DATABASE_URL", { protocols: ["postgres:"] })), /^DATABASE_URL must be a URL starting with postgres:\/\/ \(it is localhost:/)
    assert.match(refusal({ DATABASE_URL: "not a url" }, () => Settings.urlFromEnv("DATABASE_URL")), /does not parse/)
    assert.strictEqual(withEnv({ DATABASE_URL: undefined }, () => Settings.urlFromEnv("DATABASE_URL", { fallback: "postgres://db/app" })), "postgres://db/app")
  })

  it("numbers: unset means the default, nonsense names the variable", () => {
    assert.strictEqual(withEnv({ WORKERS: undefined }, () => Settings.positiveIntegerFromEnvSync("WORKERS", 4)), 4)
    assert.strictEqual(withEnv({ WORKERS: "8" }, () => Settings.positiveIntegerFromEnvSync("WORKERS", 4)), 8)
    assert.match(refusal({ WORKERS: "eight" }, () => Settings.positiveIntegerFromEnvSync("WORKERS", 4)), /^WORKERS must be a positive integer/)
  })

  it("passwordSessionStrategy given an unset variable says what is wrong, not a TypeError", () => {
    assert.throws(() => passwordSessionStrategy({ secret: undefined as unknown as string }), SessionSecretTooShort)
  })
})
