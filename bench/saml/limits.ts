/**
 * The SAML work bound (issue 18): what one message costs fw at the limits, against
 * `@node-saml/node-saml` validating the same bytes in the same run. Three messages:
 *
 * - a legitimate response with a 4,100-value group attribute (~200 KB): both must accept it;
 * - a forgery at the element limit (8,000 empty elements inside the assertion, a wrong
 *   SignatureValue): fw checks SignedInfo first and never canonicalizes the assertion;
 * - a captured SignedInfo over a padded assertion (the IdP's real signature, 8,000 elements
 *   added): the digest is computed and fails; the element bound is what limits it.
 *
 * `npx tsx bench/saml/limits.ts` (SAML_LIMITS_ROUNDS, default 5)
 */
import { SAML, ValidateInResponseTo } from "@node-saml/node-saml"
import { Effect, Either } from "effect"
import * as Libraries from "../../src/saml/Libraries.js"
import * as LoginResponse from "../../src/saml/LoginResponse.js"
import * as Idp from "../../test/saml/support/Idp.js"
import { table } from "../support.js"

const rounds = Number(process.env["SAML_LIMITS_ROUNDS"] ?? 5)

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const timed = async (run: () => Promise<unknown>) => {
  const started = performance.now()
  await run()
  return performance.now() - started
}

export const run = async () => {
  const now = Date.now()
  const libraries = await Effect.runPromise(Libraries.load)
  const expectations = Idp.expectations(now, { clockSkewMs: 60_000 })
  const nodeSaml = new SAML({
    idpCert: Idp.idpKeys.cert,
    idpIssuer: Idp.idpEntityId,
    issuer: Idp.spEntityId,
    audience: Idp.spEntityId,
    callbackUrl: Idp.acsUrl,
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: false,
    acceptedClockSkewMs: 60_000,
    validateInResponseTo: ValidateInResponseTo.never
  })
  const fields = { now, inResponseTo: "_bench" }
  const groups = Array.from({ length: 4_100 }, (_, i) => `<saml:AttributeValue>g${String(i).padStart(4, "0")}</saml:AttributeValue>`).join("")
  const withGroups = Idp.signAssertion(Idp.responseXml(fields, Idp.assertionXml(fields).replace(
    "</saml:AttributeStatement>",
    `<saml:Attribute Name="groups">${groups}</saml:Attribute></saml:AttributeStatement>`
  )))
  const padded = Idp.validResponse(fields).replace("</saml:AttributeStatement>", `${"<a/>".repeat(8_000)}</saml:AttributeStatement>`)
  const forged = padded.replace(/<ds:SignatureValue>(.)/, (_, first: string) => `<ds:SignatureValue>${first === "A" ? "B" : "A"}`)
  const cases = [
    { message: "4,100 groups, ~200 KB (accepted)", xml: withGroups, accepted: true },
    { message: "forged SignatureValue, 8,000 elements", xml: forged, accepted: false },
    { message: "captured SignedInfo, 8,000 elements", xml: padded, accepted: false }
  ]
  const rows = []
  for (const { accepted, message, xml } of cases) {
    const fw = () => Effect.runPromise(Effect.either(LoginResponse.validate(libraries, xml, expectations)))
    const peer = () => nodeSaml.validatePostResponseAsync({ SAMLResponse: Buffer.from(xml).toString("base64") }).then(() => true, () => false)
    const ours = await fw()
    if (Either.isRight(ours) !== accepted || (await peer()) !== accepted) throw new Error(`unexpected verdict on: ${message}`)
    const times = { fw: [] as Array<number>, peer: [] as Array<number> }
    for (let round = 0; round < rounds; round++) {
      times.fw.push(await timed(fw))
      times.peer.push(await timed(peer))
    }
    rows.push({
      message,
      "fw ms": Number(median(times.fw).toFixed(1)),
      "node-saml ms": Number(median(times.peer).toFixed(1)),
      "fw / node-saml": Number((median(times.fw) / median(times.peer)).toFixed(2))
    })
  }
  table(`SAML cost of one message at the limits (medians of ${rounds} alternating rounds)`, rows)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
