/**
 * ACS verification throughput: fw's response validation (strict parse, structural checks,
 * xmldsigjs signature verification, protocol checks) against `@node-saml/node-saml` validating the
 * same RSA-SHA256 signed response, in alternating rounds of the same run. Both sides do the
 * stateless part only (no InResponseTo store), 8 verifications in flight.
 *
 * `npx tsx bench/saml/acs.ts`
 */
import { SAML, ValidateInResponseTo } from "@node-saml/node-saml"
import { Effect } from "effect"
import * as Libraries from "../../src/saml/Libraries.js"
import * as LoginResponse from "../../src/saml/LoginResponse.js"
import * as Idp from "../../test/saml/support/Idp.js"
import { perSecond, table } from "../support.js"

const perRound = 400
const inFlight = 8
const rounds = 5

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** Runs `verify` `perRound` times with `inFlight` concurrent loops; verifications per second. */
const measure = async (verify: () => Promise<unknown>) => {
  const started = performance.now()
  let next = 0
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next++ < perRound) await verify()
  }))
  return perRound / ((performance.now() - started) / 1000)
}

export const run = async () => {
  const now = Date.now()
  const xml = Idp.validResponse({ now, inResponseTo: "_bench" })
  const libraries = await Effect.runPromise(Libraries.load)
  const expectations = Idp.expectations(now)
  const fw = () => Effect.runPromise(LoginResponse.validate(libraries, xml, expectations))
  const nodeSaml = new SAML({
    idpCert: Idp.idpKeys.cert,
    idpIssuer: Idp.idpEntityId,
    issuer: Idp.spEntityId,
    audience: Idp.spEntityId,
    callbackUrl: Idp.acsUrl,
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: false,
    validateInResponseTo: ValidateInResponseTo.never
  })
  const body = { SAMLResponse: Buffer.from(xml).toString("base64") }
  const peer = () => nodeSaml.validatePostResponseAsync(body)

  // Both must accept the response before their speed means anything.
  const [ours, theirs] = await Promise.all([fw(), peer()])
  if (ours.profile.nameId !== "alice@example.test" || theirs.profile?.nameID !== "alice@example.test") {
    throw new Error("a validator refused the benchmark response")
  }
  await measure(fw)
  await measure(peer)
  const results = { fw: [] as Array<number>, nodeSaml: [] as Array<number> }
  for (let round = 0; round < rounds; round++) {
    results.fw.push(await measure(fw))
    results.nodeSaml.push(await measure(peer))
  }
  table(`ACS verification of an RSA-SHA256 signed assertion (${inFlight} in flight; medians of ${rounds} alternating rounds)`, [
    { validator: "fw LoginResponse.validate", "verifications/s": perSecond(median(results.fw)), "ratio vs node-saml": Number((median(results.fw.map((v, i) => v / results.nodeSaml[i]!))).toFixed(2)) },
    { validator: "@node-saml/node-saml", "verifications/s": perSecond(median(results.nodeSaml)), "ratio vs node-saml": 1 }
  ])
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
