import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { defineApp } from "../../src/app/App.js"
import * as Settings from "../../src/app/Settings.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import * as Serve from "../support/Serve.js"
import * as Jwks from "../../src/auth/Jwks.js"
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
