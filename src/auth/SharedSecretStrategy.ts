/**
 * The shared-secret (HS256) verifier, for legacy or self-hosted deployments that sign
 * symmetrically (provider E's `jwtSecret`). It is a separate strategy with its own key: it never
 * consults a JWKS, and the JWKS path never accepts HS256. Same rules otherwise: `exp` required,
 * 16 KiB cap before parsing, 5 s default tolerance, Effect `Clock` time.
 */
import { Clock, Effect } from "effect"
import * as jose from "jose"
import * as AuthStrategy from "../app/AuthStrategy.js"
import * as JwtStrategy from "./JwtStrategy.js"

/** A shorter secret is refused: HS256 is only as strong as its key. */
export const minimumSecretBytes = 32

/** Options of `make`. */
export interface Options extends JwtStrategy.Mapping {
  readonly secret: string
  readonly issuer: string | ReadonlyArray<string>
  readonly audience: string | ReadonlyArray<string> | null
  readonly cookieName: string | null
  readonly clockToleranceSeconds?: number
}

/** Builds the HS256 verifier. Throws `StrategyConfigInvalid` for a secret under 32 bytes. */
export const make = (options: Options): AuthStrategy.AuthStrategy => {
  const key = new TextEncoder().encode(options.secret)
  if (key.byteLength < minimumSecretBytes) {
    throw new JwtStrategy.StrategyConfigInvalid({
      strategy: options.id,
      reason: `the JWT secret has ${key.byteLength} bytes; at least ${minimumSecretBytes} are required`
    })
  }
  const base: jose.JWTVerifyOptions = {
    algorithms: ["HS256"],
    issuer: typeof options.issuer === "string" ? options.issuer : [...options.issuer],
    ...(options.audience === null
      ? {}
      : { audience: typeof options.audience === "string" ? options.audience : [...options.audience] }),
    requiredClaims: ["exp"],
    clockTolerance: options.clockToleranceSeconds ?? JwtStrategy.defaultClockToleranceSeconds
  }
  return {
    id: options.id,
    outboundHosts: [],
    securitySchemes: JwtStrategy.securitySchemesOf(options.id, options.cookieName),
    authenticate: ({ headers }) => {
      const token = JwtStrategy.tokenOf(headers, options.cookieName)
      if (token === undefined) return Effect.succeed(AuthStrategy.Verdict.NoMatch())
      if (token.length > JwtStrategy.maxTokenBytes) {
        return Effect.succeed(AuthStrategy.Verdict.Failed({ reason: `the token is larger than ${JwtStrategy.maxTokenBytes} bytes` }))
      }
      return Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.promise(() =>
          jose.jwtVerify(token, key, { ...base, currentDate: new Date(now) }).then(
            (result) => JwtStrategy.verdictOf(options, result.payload),
            JwtStrategy.failedVerdict
          )
        ))
    }
  }
}
