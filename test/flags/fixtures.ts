/**
 * A small app gated by flags, served over every transport in the flags tests.
 */
import { Effect, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { action, mutation, query } from "../../src/app/Procedure.js"
import { defineFlag, flagValue, flagsPlugin, isFlagEnabled, requireFlag } from "../../src/flags/index.js"
import type { Options } from "../../src/flags/index.js"
import { tokenStrategy } from "../app/fixtures.js"

export { bearer } from "../app/fixtures.js"

export const Checkout = defineFlag({
  key: "checkout",
  value: Schema.Struct({ fee: Schema.Number }),
  default: { fee: 0 },
  targeting: [{ tenantIds: ["acme"] }],
  variants: [{ name: "low", value: { fee: 1 } }, { name: "high", value: { fee: 2 }, weight: 0 }]
})

/** How many times each handler ran (a gated call must not reach its handler). */
export const ran = { report: 0, purge: 0, pay: 0 }

export const report = query("beta.report", {
  input: Schema.Struct({}),
  output: Schema.Struct({ ok: Schema.Boolean }),
  publicApi: {},
  handler: () => Effect.sync(() => (ran.report++, { ok: true }))
})

export const purge = mutation("admin.purge", {
  input: Schema.Struct({ what: Schema.String }),
  output: Schema.Struct({ purged: Schema.String }),
  publicApi: {},
  handler: ({ what }) => Effect.sync(() => (ran.purge++, { purged: what }))
})

export const pay = action("checkout.pay", {
  input: Schema.Struct({}),
  output: Schema.Struct({ fee: Schema.Number }),
  guards: [requireFlag("checkout")],
  handler: (_input, ctx) => Effect.map(flagValue(ctx, Checkout), ({ fee }) => (ran.pay++, { fee }))
})

export const check = query("flags.check", {
  input: Schema.Struct({ key: Schema.String }),
  output: Schema.Boolean,
  handler: ({ key }, ctx) => isFlagEnabled(ctx, key)
})

export const echo = query("plain.echo", {
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.String,
  publicApi: {},
  handler: ({ text }) => Effect.succeed(text)
})

export const flags = {
  beta: { targeting: [{ tenantIds: ["acme"] }], description: "the beta report" },
  "admin-tools": false
} as const

/** The flags plugin of the test app (a new registry per call). */
export const plugin = (options: Omit<Options, "flags" | "typedFlags" | "gatedBy"> = {}) =>
  flagsPlugin({
    ...options,
    flags,
    typedFlags: [Checkout],
    gatedBy: { "beta.report": "beta", "/^admin\\./": "admin-tools" }
  })

/** The test app with its own plugin instance. */
export const makeApp = (options: Omit<Options, "flags" | "typedFlags" | "gatedBy"> = {}) => {
  const flagsPluginInstance = plugin(options)
  return {
    plugin: flagsPluginInstance,
    app: defineApp({ procedures: [report, purge, pay, check, echo], plugins: [flagsPluginInstance], auth: tokenStrategy })
  }
}
