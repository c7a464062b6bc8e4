/**
 * `@fw/framework/saml`: SAML 2.0 single sign-on (`samlSsoPlugin`), with the strict response
 * validation, metadata, and the one-time id stores it is built from.
 */
export * as Errors from "./Errors.js"
export { SamlConfigInvalid, SamlIdpUnavailable, SamlLibraryUnavailable, SamlRejected } from "./Errors.js"
export * as IdpSource from "./IdpSource.js"
export * as LoginResponse from "./LoginResponse.js"
export type { Profile } from "./LoginResponse.js"
export * as Metadata from "./Metadata.js"
export * as OneTimeIds from "./OneTimeIds.js"
export * as SamlSsoPlugin from "./SamlSsoPlugin.js"
export { samlSsoPlugin } from "./SamlSsoPlugin.js"
export { SamlLogout, SamlReplay } from "./tables.js"
