/**
 * `@fw/framework/auth`: the AuthStrategy contract, composition, the framework session and the
 * identity-provider strategies.
 */
export * as AuthStrategy from "./AuthStrategy.js"
export { composeAuthStrategies, readBearer, readCookie, Verdict } from "./AuthStrategy.js"
export * as HostedLogin from "./HostedLogin.js"
export {
  idpAAuthenticateWithCode,
  idpABeginLogin,
  idpAHostedLoginPlugin,
  idpAHostedLoginRoutes,
  IdpAStateMismatchError,
  provisionUser
} from "./HostedLogin.js"
export type { IdpAProfile } from "./HostedLogin.js"
export * as IdentityProviders from "./IdentityProviders.js"
export {
  idpAStrategy,
  idpBStrategy,
  idpCStrategy,
  idpDStrategy,
  idpEStrategy,
  jwtBearerStrategy,
  oidcStrategy
} from "./IdentityProviders.js"
export type { IdpAClaims } from "./IdentityProviders.js"
export * as Jwks from "./Jwks.js"
export * as JwtStrategy from "./JwtStrategy.js"
export * as Session from "./Session.js"
export { clearSessionCookie, issueSession, passwordSessionStrategy, sessionCookie, verifySession } from "./Session.js"
export { Organizations, Users } from "./tables.js"
