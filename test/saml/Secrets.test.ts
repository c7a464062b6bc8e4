/**
 * SAML secrets never reach a log line (spec 5.3 rule 5). Every log line, at every level, of a full
 * login (signed AuthnRequest, encrypted assertion, session) and logout (signed LogoutRequest, the
 * IdP's LogoutResponse), plus the failures that do log (a refused response, an IdP that cannot be
 * reached, an `onLogin` that fails), is captured — through the Effect logger and on the process's
 * stdout and stderr — and searched for the session secret, the SP private keys and the session
 * cookies the login issued. Run on every store tier: replay and logout state live in the store.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, HashMap, List, Logger, LogLevel, TestClock } from "effect"
import { inflateRawSync } from "node:zlib"
import type { Options } from "../../src/saml/SamlSsoPlugin.js"
import * as Pg from "../support/Pg.js"
import * as Idp from "./support/Idp.js"
import * as Sp from "./support/Sp.js"

if (!Pg.serverUrl) console.warn(Pg.skipReason)

const at = Date.UTC(2026, 10, 24, 12)
const sameSite = { "sec-fetch-site": "same-origin" }

/** Everything logged while `effect` runs: Effect log lines (message, annotations, spans, cause) and raw process output. */
const capturing = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const logger = Logger.make(({ annotations, cause, logLevel, message, spans }) => {
      lines.push([
        logLevel.label,
        JSON.stringify(message, (_, value) => typeof value === "bigint" ? String(value) : value),
        ...[...HashMap.entries(annotations)].map(([key, value]) => `${key}=${JSON.stringify(value)}`),
        ...List.toArray(spans).map((span) => span.label),
        Cause.isEmpty(cause) ? "" : Cause.pretty(cause, { renderErrorCause: true })
      ].join(" "))
    })
    const writes = { stdout: process.stdout.write.bind(process.stdout), stderr: process.stderr.write.bind(process.stderr) }
    const tap = (stream: "stdout" | "stderr") => (chunk: string | Uint8Array, ...rest: Array<unknown>) => {
      lines.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"))
      return (writes[stream] as (...args: Array<unknown>) => boolean)(chunk, ...rest)
    }
    const result = yield* Effect.acquireUseRelease(
      Effect.sync(() => {
        process.stdout.write = tap("stdout") as typeof process.stdout.write
        process.stderr.write = tap("stderr") as typeof process.stderr.write
      }),
      () => effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)), Logger.withMinimumLogLevel(LogLevel.All)),
      () =>
        Effect.sync(() => {
          process.stdout.write = writes.stdout
          process.stderr.write = writes.stderr
        })
    )
    return { result, lines }
  })

/** Pieces of a PEM key long enough to identify it: every base64 line of its body. */
const pemLines = (pem: string) => pem.split("\n").map((line) => line.trim()).filter((line) => line.length >= 32 && !line.startsWith("-----"))

const tiers = [
  ["memory", () => Sp.memory],
  ["sqlite", () => Sp.sqlite()],
  ["postgresql", Pg.serverUrl ? () => Sp.sql(Pg.layerFreshClient) : null]
] as const

for (const [name, tier] of tiers) {
  describe.skipIf(tier === null)(`SAML secrets in logs: ${name}`, () => {
    it.scoped("a full login and logout, and the failures that log, write no secret", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(at)
        const overrides: Partial<Options> = {
          privateKey: Idp.spKeys.key,
          signingCert: Idp.spKeys.cert,
          logoutRedirect: "/bye",
          onLogin: (profile) =>
            profile.nameId === "mallory@example.test"
              ? Effect.fail(new Error(`no account for ${profile.nameId}`))
              : { type: "user", id: profile.email ?? profile.nameId, tenantId: "acme" }
        }
        const { lines, result: issued } = yield* capturing(Effect.gen(function*() {
          const sp = yield* Sp.serve(tier!(), overrides)
          const browser = Sp.Browser.jar()
          // Login: a signed AuthnRequest, an encrypted assertion, the session.
          const request = yield* Sp.startLogin(sp.served.url, "/home")
          const encrypted = yield* Effect.promise(() => Idp.encryptAssertion(Idp.validResponse({ now: at, inResponseTo: request.id })))
          const acs = yield* Sp.postToAcs(sp.served.url, encrypted, request)
          assert.deepStrictEqual([acs.status, acs.location], [302, "/home"])
          browser.take(acs)
          const cookies = { session: browser.get("fw:session")!, companion: [...acs.setCookies].find((line) => !line.startsWith("fw:session="))! }
          assert.isDefined(cookies.session)
          assert.strictEqual((yield* sp.client.call(Sp.whoAmI, {}, { headers: { cookie: browser.header() } })).id, "alice@example.test")

          // Logout: a signed LogoutRequest, then the IdP's LogoutResponse.
          const logout = yield* Sp.Browser.get(`${sp.served.url}/saml/logout`, browser.header(), sameSite)
          assert.strictEqual(logout.status, 302)
          browser.take(logout)
          const requestXml = new URL(logout.location!).searchParams.get("SAMLRequest")!
          const logoutId = /ID="([^"]+)"/.exec(inflateRawSync(Buffer.from(requestXml, "base64")).toString("utf8"))![1]!
          const done = yield* Sp.Browser.get(`${sp.served.url}/saml/slo?${Idp.redirectQuery("SAMLResponse", Idp.logoutResponseXml({ inResponseTo: logoutId, now: at }), {})}`, browser.header())
          assert.deepStrictEqual([done.status, done.location], [302, "/bye"])

          // Failures that log: a response signed by another key, an onLogin that fails, an IdP that cannot be reached.
          const forged = yield* Sp.startLogin(sp.served.url)
          const refused = yield* Sp.postToAcs(sp.served.url, Idp.signAssertion(Idp.responseXml({ now: at, inResponseTo: forged.id }, Idp.assertionXml({ now: at, inResponseTo: forged.id })), { keys: Idp.evilKeys }), forged)
          assert.strictEqual(refused.status, 401)
          const unknown = yield* Sp.startLogin(sp.served.url)
          const failing = yield* Sp.postToAcs(sp.served.url, Idp.validResponse({ now: at, inResponseTo: unknown.id, nameId: "mallory@example.test", assertionId: "_mallory" }), unknown)
          assert.strictEqual(failing.status, 500)
          const unreachable = yield* Sp.serve(tier!(), { ...overrides, idp: { metadataUrl: "http://127.0.0.1:9/metadata" } })
          assert.strictEqual((yield* Sp.Browser.get(`${unreachable.served.url}/saml/login`)).status, 503)
          return cookies
        }))

        // The capture saw the failures it should have (so it can see a secret if one were logged).
        const all = lines.join("\n")
        assert.include(all, "SAML is unavailable")
        assert.include(all, "no account for mallory@example.test")
        const secrets: ReadonlyArray<readonly [string, string]> = [
          ["sessionSecret", Sp.sessionSecret],
          ["the session cookie", issued.session],
          ["the companion cookie", issued.companion.split(";")[0]!.split("=").slice(1).join("=")],
          ...pemLines(Idp.spKeys.key).map((line) => ["privateKey / decryptionPvk", line] as const)
        ]
        for (const [what, secret] of secrets) {
          assert.isAbove(secret.length, 16, what)
          const leak = lines.find((line) => line.includes(secret))
          assert.isUndefined(leak, `${what} was logged: ${leak?.replaceAll(secret, "<secret>").slice(0, 300)}`)
        }
      }), 60_000)
  })
}
