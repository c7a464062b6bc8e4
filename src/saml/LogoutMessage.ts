/**
 * Reading the logout messages the IdP sends to `/saml/slo` once their signature has been checked
 * (redirect binding over the raw query, POST binding enveloped): a LogoutRequest naming a session
 * to end, or the LogoutResponse answering the SP's own LogoutRequest.
 */
import { Effect } from "effect"
import { reject, type SamlRejected } from "./Errors.js"
import * as Xml from "./Xml.js"

/** A message the IdP sent to the SLO endpoint. */
export type LogoutMessage =
  | { readonly _tag: "LogoutRequest"; readonly id: string; readonly nameId: string; readonly expiresAt: number }
  | { readonly _tag: "LogoutResponse"; readonly inResponseTo: string | undefined }

/** What a logout message is checked against. */
export interface Expectations {
  readonly idpEntityId: string
  readonly sloUrl: string
  readonly clockSkewMs: number
  readonly now: number
  /** How long an IdP LogoutRequest id is remembered when the request names no NotOnOrAfter. */
  readonly rememberMs: number
}

/** Reads the message at the root of `document`. */
export const read = (document: Document, expected: Expectations): Effect.Effect<LogoutMessage, SamlRejected> =>
  Effect.gen(function*() {
    const root = document.documentElement
    const kind = root.namespaceURI === Xml.ns.protocol ? root.localName : undefined
    if (kind !== "LogoutRequest" && kind !== "LogoutResponse") return yield* reject("malformed", "not a LogoutRequest or LogoutResponse")
    const isRequest = kind === "LogoutRequest"
    if ((yield* Xml.childText(root, Xml.ns.assertion, "Issuer")) !== expected.idpEntityId) {
      return yield* reject("issuer", "the Issuer is not the configured IdP")
    }
    const destination = root.getAttribute("Destination")
    if (destination !== null && destination !== expected.sloUrl) return yield* reject("destination", "the Destination is not this SLO endpoint")
    if (!isRequest) return { _tag: "LogoutResponse", inResponseTo: root.getAttribute("InResponseTo") || undefined } as const
    const notOnOrAfter = yield* Xml.time(root, "NotOnOrAfter")
    if (notOnOrAfter !== undefined && expected.now >= notOnOrAfter + expected.clockSkewMs) {
      return yield* reject("expired", "the LogoutRequest has expired")
    }
    const nameId = Xml.only(root, Xml.ns.assertion, "NameID")
    const id = root.getAttribute("ID")
    if (nameId === undefined || !id) return yield* reject("malformed", "the LogoutRequest needs an ID and a NameID")
    return {
      _tag: "LogoutRequest",
      id,
      nameId: yield* Xml.text(nameId),
      expiresAt: (notOnOrAfter ?? expected.now + expected.rememberMs) + expected.clockSkewMs
    } as const
  })
