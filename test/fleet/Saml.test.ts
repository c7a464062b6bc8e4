/**
 * SAML one-time ids across real replicas (`pluginsApp.ts`, the default store-backed replay
 * protection on one PostgreSQL): a login started on one replica is answered on the other; an
 * assertion accepted by one is refused as a replay (`SamlRejected`, reason `replay`) by the other
 * even when it answers a login that replica started itself; the accepted response posted again to
 * the other is refused (its request was spent). Both directions. With in-process ids (one replica's
 * memory) the first would be refused and the other two accepted. The responses are
 * signed by `xml-crypto` with the SAML tests' IdP key (`test/saml/support/Idp.ts`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as path from "node:path"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as flagTables from "../../src/flags/tables.js"
import { SamlReplay } from "../../src/saml/tables.js"
import * as Idp from "../saml/support/Idp.js"
import * as Sp from "../saml/support/Sp.js"
import * as Pg from "../support/Pg.js"
import * as Fleet from "./support.js"

/** The answer's verdict: `accepted` (a session is set), else the refusal's error tag and reason. */
const verdictOf = (answer: Sp.Browser.Answer) => {
  if (answer.status === 302 && Sp.Browser.setCookie(answer, "fw:session") !== undefined) return "accepted"
  const body = JSON.parse(answer.body) as { readonly error?: string; readonly reason?: string }
  return `${answer.status} ${body.error}:${body.reason}`
}

describe.skipIf(Pg.serverUrl === null)("SAML one-time ids across replicas (real processes)", () => {
  it.scopedLive("a response accepted by one replica is refused by the other; its assertion is a replay there", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([SamlReplay, ...flagTables.all]).pipe(Effect.provide(Pg.layerClient(url)))
      const appPath = yield* Effect.promise(() => Fleet.bundleApp("pluginsApp.ts"))
      const env = { DATABASE_URL: url, FW_SAML_FIXTURES: path.join(import.meta.dirname, "..", "saml", "fixtures") }
      const [a, b] = yield* Effect.all([Fleet.spawnApp("a", appPath, env), Fleet.spawnApp("b", appPath, env)], { concurrency: "unbounded" })

      const verdicts: Array<string> = []
      for (const [first, second, tag] of [[a, b, "ab"], [b, a, "ba"]] as const) {
        // A login started on `second` and answered on `first`: the request id is shared.
        const started = yield* Sp.startLogin(second.url)
        const xml = Idp.validResponse({ now: Date.now(), inResponseTo: started.id, assertionId: `_assertion-${tag}`, responseId: `_response-${tag}` })
        verdicts.push(verdictOf(yield* Sp.postToAcs(first.url, xml, started)))
        // The same assertion answering a login `second` started itself: seen on `first`, a replay.
        const own = yield* Sp.startLogin(second.url)
        const replayed = Idp.validResponse({ now: Date.now(), inResponseTo: own.id, assertionId: `_assertion-${tag}`, responseId: `_response-${tag}-2` })
        verdicts.push(verdictOf(yield* Sp.postToAcs(second.url, replayed, own)))
        // The first response posted again, to `second`: its request was consumed on `first`.
        verdicts.push(verdictOf(yield* Sp.postToAcs(second.url, xml, started)))
        // A fresh assertion for a fresh login is accepted there (the refusals are not a broken replica).
        const fresh = yield* Sp.startLogin(second.url)
        verdicts.push(verdictOf(
          yield* Sp.postToAcs(second.url, Idp.validResponse({ now: Date.now(), inResponseTo: fresh.id, assertionId: `_fresh-${tag}` }), fresh)
        ))
      }
      console.log(`fleet SAML: 2 replicas, 8 responses posted: ${verdicts.join(", ")}`)
      const refusals = ["accepted", "401 SamlRejected:replay", "401 SamlRejected:in_response_to", "accepted"]
      assert.deepStrictEqual(verdicts, [...refusals, ...refusals])
      const stored = yield* Fleet.withPg(url, (c) => c.query(`SELECT id FROM _fw_saml_replay WHERE kind = 'assertion' ORDER BY id`).then((r) => r.rows.map((row) => row.id as string)))
      assert.deepStrictEqual(stored, ["assertion:_assertion-ab", "assertion:_assertion-ba", "assertion:_fresh-ab", "assertion:_fresh-ba"])
    }), { timeout: 60_000 })
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
