/**
 * The SAML area's errors. A rejected message is `SamlRejected` with a stable reason code ops can
 * act on (`audience`, `signature`, `reference`…); the HTTP answer carries the code, never the XML.
 */
import { Schema } from "effect"

/** Why a SAML message was refused. */
export const RejectionReason = Schema.Literal(
  "malformed",
  "too_large",
  "dtd",
  "status",
  "assertion_count",
  "encrypted",
  "decryption",
  "signature_missing",
  "signature",
  "reference",
  "algorithm",
  "node_text",
  "issuer",
  "destination",
  "recipient",
  "audience",
  "subject_confirmation",
  "expired",
  "not_yet_valid",
  "in_response_to",
  "unsolicited",
  "replay"
)
export type RejectionReason = typeof RejectionReason.Type

/** A SAML message refused by verification. */
export class SamlRejected extends Schema.TaggedError<SamlRejected>()("SamlRejected", {
  reason: RejectionReason,
  detail: Schema.String
}) {
  override get message() {
    return `SAML message rejected (${this.reason}): ${this.detail}`
  }
}

/** A plugin configuration refused at construction (thrown: a programming error). */
export class SamlConfigInvalid extends Schema.TaggedError<SamlConfigInvalid>()("SamlConfigInvalid", {
  reason: Schema.String
}) {
  override get message() {
    return `samlSsoPlugin: ${this.reason}`
  }
}

/** The packages SAML verification loads on first use: optional peer dependencies of the framework. */
export const libraryPackages = ["xmldsigjs", "xml-core", "xpath", "@xmldom/xmldom"] as const

/** The optional XML libraries (`libraryPackages`) could not be loaded. */
export class SamlLibraryUnavailable extends Schema.TaggedError<SamlLibraryUnavailable>()("SamlLibraryUnavailable", {
  detail: Schema.String
}) {
  override get message() {
    return `samlSsoPlugin needs the optional packages ${libraryPackages.join(", ")} to verify SAML messages; ` +
      `install them with \`npm install ${libraryPackages.join(" ")}\` (${this.detail})`
  }
}

/** Shorthand for a rejection. */
export const reject = (reason: RejectionReason, detail: string): SamlRejected => new SamlRejected({ reason, detail })

/** Neither the IdP metadata nor an explicit IdP configuration is available. */
export class SamlIdpUnavailable extends Schema.TaggedError<SamlIdpUnavailable>()("SamlIdpUnavailable", {
  detail: Schema.String
}) {
  override get message() {
    return `the SAML IdP configuration is unavailable: ${this.detail}`
  }
}
