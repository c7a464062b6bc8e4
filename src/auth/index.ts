/**
 * `@fw/framework/auth`: the AuthStrategy contract, composition, and the framework session.
 */
export * as AuthStrategy from "./AuthStrategy.js"
export { composeAuthStrategies, readBearer, readCookie, Verdict } from "./AuthStrategy.js"
export * as Session from "./Session.js"
export { clearSessionCookie, issueSession, passwordSessionStrategy, sessionCookie, verifySession } from "./Session.js"
