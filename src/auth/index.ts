/**
 * `@fw/framework/auth`: the AuthStrategy contract and its composition, the framework session, the
 * identity-provider strategies (JWKS-verified JWTs), and hosted login for provider A.
 */
export * as AuthStrategy from "../app/AuthStrategy.js"
export { composeAuthStrategies, readBearer, readCookie, Verdict } from "../app/AuthStrategy.js"
export * as Claims from "./Claims.js"
export * as Discovery from "./Discovery.js"
export * as HostedLogin from "./HostedLogin.js"
export {
  idpAAuthenticateWithCode,
  idpABeginLogin,
  IdpAExchangeFailed,
  idpAHostedLoginPlugin,
  idpAHostedLoginRoutes,
  IdpAStateMismatchError,
  provisionIdpAUser
} from "./HostedLogin.js"
export type { IdpAProfile } from "./HostedLogin.js"
export * as IdentityProviders from "./IdentityProviders.js"
export {
  IdpAClaims,
  idpAClaims,
  idpAStrategy,
  idpBStrategy,
  idpCStrategy,
  idpDStrategy,
  idpEStrategy,
  jwtBearerStrategy,
  oidcStrategy
} from "./IdentityProviders.js"
export * as Jwks from "./Jwks.js"
export { JwksUnavailable } from "./Jwks.js"
export * as JwtStrategy from "./JwtStrategy.js"
export { StrategyConfigInvalid } from "./JwtStrategy.js"
export * as Provisioning from "./Provisioning.js"
export * as Session from "./Session.js"
export {
  clearSessionCookie,
  issueSession,
  passwordSessionStrategy,
  SessionInvalid,
  SessionSecretTooShort,
  sessionCookie,
  verifySession
} from "./Session.js"
export * as SharedSecretStrategy from "./SharedSecretStrategy.js"
export { Organizations, Users } from "./tables.js"
