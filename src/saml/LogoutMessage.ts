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
  | {
    readonly _tag: "LogoutRequest"
    readonly id: string
    readonly nameId: string
    /** The IdP sessions it ends; empty means every session of the NameID. */
    readonly sessionIndexes: ReadonlyArray<string>
    /** Until when its id must be remembered (it is refused afterwards anyway). */
    readonly expiresAt: number
  }
  | { readonly _tag: "LogoutResponse"; readonly inResponseTo: string | undefined }

/** What a logout message is checked against. */
export interface Expectations {
  readonly idpEntityId: string
  readonly sloUrl: string
  readonly clockSkewMs: number
  readonly now: number
  /** How old a LogoutRequest may be (by its IssueInstant), and so how long its id is remembered. */
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
    // A signed message over an HTTP binding must say where it is going (SAML bindings 3.4.5.2, 3.5.5.2).
    if (root.getAttribute("Destination") !== expected.sloUrl) return yield* reject("destination", "the Destination is not this SLO endpoint")
    if (!isRequest) return { _tag: "LogoutResponse", inResponseTo: root.getAttribute("InResponseTo") || undefined } as const
    // Without a bound, a captured request could end the session again once its id is forgotten.
    const issued = yield* Xml.time(root, "IssueInstant")
    const notOnOrAfter = yield* Xml.time(root, "NotOnOrAfter")
    if (issued === undefined || expected.now + expected.clockSkewMs < issued) {
      return yield* reject("not_yet_valid", "the LogoutRequest has no IssueInstant, or one in the future")
    }
    const expiresAt = Math.min(notOnOrAfter ?? Number.POSITIVE_INFINITY, issued + expected.rememberMs) + expected.clockSkewMs
    if (expected.now >= expiresAt) return yield* reject("expired", "the LogoutRequest has expired")
    const nameId = Xml.only(root, Xml.ns.assertion, "NameID")
    const id = root.getAttribute("ID")
    if (nameId === undefined || !id) return yield* reject("malformed", "the LogoutRequest needs an ID and a NameID")
    const sessionIndexes: Array<string> = []
    for (const index of Xml.children(root, Xml.ns.protocol, "SessionIndex")) sessionIndexes.push(yield* Xml.text(index))
    return { _tag: "LogoutRequest", id, nameId: yield* Xml.text(nameId), sessionIndexes, expiresAt } as const
  })
