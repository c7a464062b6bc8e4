/**
 * The typed errors of the auth area: discovery and key sets, strategy configuration, hosted login,
 * provisioning and sessions.
 */
import { Schema } from "effect"

/** The discovery document could not be used. */
export class DiscoveryUnavailable extends Schema.TaggedError<DiscoveryUnavailable>()("DiscoveryUnavailable", {
  url: Schema.String,
  /** A fixed phrase that names no URL: it can reach the client. */
  reason: Schema.String,
  /** What only the log gets (for instance the issuer a wrong document names). */
  detail: Schema.optional(Schema.String)
}) {
  override get message() {
    return `the discovery document at ${this.url} is unavailable: ${this.reason}${this.detail === undefined ? "" : ` (${this.detail})`}`
  }
}

/** The state returned to the callback is not the one this browser was given (spec 7.1). */
export class IdpAStateMismatchError extends Schema.TaggedError<IdpAStateMismatchError>()("IdpAStateMismatchError", {}) {
  override get message() {
    return "the login state does not match"
  }
}

/** The provider refused or failed the code exchange. Carries no response body. */
export class IdpAExchangeFailed extends Schema.TaggedError<IdpAExchangeFailed>()("IdpAExchangeFailed", {
  status: Schema.NullOr(Schema.Number),
  reason: Schema.String
}) {
  override get message() {
    return `the code exchange failed: ${this.reason}`
  }
}

/** Fetching a key set (or a discovery document) failed. Carries no response body. */
export class JwksUnavailable extends Schema.TaggedError<JwksUnavailable>()("JwksUnavailable", {
  url: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `the key set at ${this.url} is unavailable: ${this.reason}`
  }
}

/** A strategy configuration refused at construction (thrown: it is a programming error). */
export class StrategyConfigInvalid extends Schema.TaggedError<StrategyConfigInvalid>()("StrategyConfigInvalid", {
  strategy: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `auth strategy "${this.strategy}": ${this.reason}`
  }
}

/** A login the provisioner refuses (answered 403 by the login routes). */
export class ProvisioningRefused extends Schema.TaggedError<ProvisioningRefused>()("ProvisioningRefused", {
  reason: Schema.String
}) {
  get status() {
    return 403
  }
  override get message() {
    return this.reason
  }
}

/** A secret shorter than 32 bytes cannot sign sessions. */
export class SessionSecretTooShort extends Schema.TaggedError<SessionSecretTooShort>()("SessionSecretTooShort", {
  bytes: Schema.Number
}) {
  override get message() {
    return `the session secret has ${this.bytes} bytes; at least 32 are required`
  }
}

/** Why a session value was refused. */
export class SessionInvalid extends Schema.TaggedError<SessionInvalid>()("SessionInvalid", {
  reason: Schema.Literal("malformed", "signature", "expired")
}) {
  override get message() {
    return `invalid session: ${this.reason}`
  }
}
