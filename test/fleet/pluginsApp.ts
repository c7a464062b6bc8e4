/**
 * A replica for the fleet's plugin scenarios, run as a real process on the PostgreSQL at
 * `DATABASE_URL` with the fleet change scope: `samlSsoPlugin` with its one-time ids in the shared
 * store (the default `replayProtection`) and `flagsPlugin` with `store: "sql"`, gating
 * `beta.report` by the flag `beta` (on by default). Prints `PORT <n>` once it answers HTTP.
 *
 * Environment: `FW_SAML_FIXTURES`, the directory of the SAML tests' keys (`test/saml/fixtures`:
 * the IdP's certificate and the SP's decryption key); `FW_INSPECT_TOKEN`, the operator's token for
 * the flags inspect routes. The SAML settings are those of the SAML tests' IdP
 * (`test/saml/support/Idp.ts`), so its signed responses are valid here.
 */
import { Effect, Schema } from "effect"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import { passwordSessionStrategy } from "../../src/auth/Session.js"
import { flagsPlugin } from "../../src/flags/index.js"
import * as Subject from "../../src/kernel/Subject.js"
import { samlSsoPlugin } from "../../src/saml/SamlSsoPlugin.js"
import * as Replica from "./replica.js"

/** The procedure the flag `beta` gates. */
export const report = query("beta.report", {
  input: Schema.Struct({}),
  output: Schema.Struct({ replica: Schema.String }),
  handler: () => Effect.sync(() => ({ replica: process.env.FW_REPLICA ?? "?" }))
})

/** The flags plugin (its `flags.evaluate` definition is what the test's clients connect with). */
export const flags = () => flagsPlugin({ flags: { beta: true }, gatedBy: { "beta.report": "beta" }, store: "sql", usage: { track: false } })

const sessionSecret = "fleet-saml-session-secret-0123456789"

/** `Authorization: Bearer fleet` is the harness's caller. */
const bearer: AuthStrategy.AuthStrategy = {
  id: "fleet",
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.succeed(
      AuthStrategy.readBearer(headers) === "fleet"
        ? AuthStrategy.Verdict.Authenticated({ subject: Subject.make({ type: "user", id: "fleet", tenantId: "acme" }) })
        : AuthStrategy.Verdict.NoMatch()
    )
}

const main = () => {
  const url = process.env.DATABASE_URL
  const fixtures = process.env.FW_SAML_FIXTURES
  if (url === undefined || fixtures === undefined) throw new Error("DATABASE_URL and FW_SAML_FIXTURES are required")
  const fixture = (name: string) => readFileSync(path.join(fixtures, name), "utf8")
  const saml = samlSsoPlugin({
    idp: {
      entityId: "https://idp.example.test/metadata",
      entryPoint: "https://idp.example.test/sso",
      sloUrl: "https://idp.example.test/slo",
      idpCert: fixture("idp.crt")
    },
    sp: { entityId: "https://app.example.test/saml/metadata", acsUrl: "https://app.example.test/saml/acs", sloUrl: "https://app.example.test/saml/slo" },
    sessionSecret,
    decryptionPvk: fixture("sp.key"),
    onLogin: (profile) => ({ type: "user", id: profile.email ?? profile.nameId, tenantId: "acme" })
  })
  const app = defineApp({
    name: "fleet-plugins",
    procedures: [report],
    plugins: [saml, flags()],
    auth: [bearer, passwordSessionStrategy({ secret: sessionSecret })]
  })
  Replica.launch({ app, probePath: "/_fw/health", url, pollMs: 60_000, maxConnections: 6 })
}

if (/pluginsApp\.(ts|mjs)$/.test(process.argv[1] ?? "")) main()
