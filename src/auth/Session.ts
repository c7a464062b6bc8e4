/**
 * The framework session: a signed, expiring `fw:session` cookie minted by `issueSession` after any
 * login (password, hosted login, SAML) and read by `passwordSessionStrategy`.
 *
 * Format: `base64url(JSON {subject, exp}) "." base64url(HMAC-SHA256(secret, payload))`. Tampering
 * with either part fails verification; the signature is compared in constant time.
 */
import { Clock, Effect, Schema } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"
import * as Subject from "../kernel/Subject.js"
import * as AuthStrategy from "../app/AuthStrategy.js"
import { SessionInvalid, SessionSecretTooShort } from "./Errors.js"

/** The session cookie's name. */
export const cookieName = "fw:session"

/** Default lifetime: 7 days. */
export const defaultMaxAgeSeconds = 604_800

const Payload = Schema.Struct({
  subject: Schema.Struct({
    type: Schema.String,
    id: Schema.String,
    tenantId: Schema.NullOr(Schema.String),
    metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    scopes: Schema.Array(Schema.String)
  }),
  /** Expiry, epoch seconds. */
  exp: Schema.Number
})
const decodePayload = Schema.decodeUnknownOption(Schema.parseJson(Payload))

const minimumSecretBytes = 32

const checkSecret = (secret: string) => {
  const bytes = Buffer.byteLength(secret)
  return bytes < minimumSecretBytes ? Effect.fail(new SessionSecretTooShort({ bytes })) : Effect.void
}

/** Throws `SessionSecretTooShort` for a secret under 32 bytes: for constructors, which refuse at configuration time. */
export const checkSecretSync = (secret: string): void => {
  // `process.env.SESSION_SECRET!` when the variable is unset: say so, not a TypeError from Buffer.
  if (typeof secret !== "string") throw new SessionSecretTooShort({ bytes: 0 })
  const bytes = Buffer.byteLength(secret)
  if (bytes < minimumSecretBytes) throw new SessionSecretTooShort({ bytes })
}

const sign = (secret: string, payload: string) => createHmac("sha256", secret).update(payload).digest()

/** Mints a session value for `subject`, valid for `maxAgeSeconds` (default 7 days) from now. */
export const issueSession = (
  subject: Subject.Subject,
  secret: string,
  options: { readonly maxAgeSeconds?: number } = {}
): Effect.Effect<string, SessionSecretTooShort> =>
  Effect.gen(function*() {
    yield* checkSecret(secret)
    const now = yield* Clock.currentTimeMillis
    const exp = Math.floor(now / 1000) + (options.maxAgeSeconds ?? defaultMaxAgeSeconds)
    const payload = Buffer.from(JSON.stringify({ subject, exp })).toString("base64url")
    return `${payload}.${sign(secret, payload).toString("base64url")}`
  })

/** Verifies a session value and returns its subject. */
export const verifySession = (value: string, secret: string): Effect.Effect<Subject.Subject, SessionInvalid | SessionSecretTooShort> =>
  Effect.gen(function*() {
    yield* checkSecret(secret)
    const [payload, signature, ...rest] = value.split(".")
    if (payload === undefined || signature === undefined || rest.length > 0) return yield* new SessionInvalid({ reason: "malformed" })
    // Compare the encoded text, not decoded bytes: a lenient base64 decoder would accept
    // variants of one signature, and the value must be exactly what was issued.
    const expected = Buffer.from(sign(secret, payload).toString("base64url"))
    const given = Buffer.from(signature)
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return yield* new SessionInvalid({ reason: "signature" })
    }
    const decoded = decodePayload(Buffer.from(payload, "base64url").toString("utf8"))
    if (decoded._tag === "None") return yield* new SessionInvalid({ reason: "malformed" })
    if (decoded.value.exp * 1000 <= (yield* Clock.currentTimeMillis)) return yield* new SessionInvalid({ reason: "expired" })
    return Subject.make(decoded.value.subject)
  })

/** A `Set-Cookie` value carrying a session (HttpOnly, SameSite=Lax, Path=/). */
export const sessionCookie = (
  value: string,
  options: { readonly maxAgeSeconds?: number; readonly secure?: boolean } = {}
): string =>
  `${cookieName}=${value}; Path=/; Max-Age=${options.maxAgeSeconds ?? defaultMaxAgeSeconds}; HttpOnly; SameSite=Lax${
    options.secure ? "; Secure" : ""
  }`

/** A `Set-Cookie` value that clears the session. */
export const clearSessionCookie = (): string => `${cookieName}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax`

/**
 * The password-session strategy (id `password-session`): reads the `fw:session` cookie. No cookie
 * is no match; a cookie that is tampered with or expired is a failed verdict (the chain stops); a
 * valid one authenticates. Throws `SessionSecretTooShort` for a secret under 32 bytes.
 */
export const passwordSessionStrategy = (options: {
  readonly secret: string
  readonly cookieName?: string
}): AuthStrategy.AuthStrategy => {
  checkSecretSync(options.secret)
  const name = options.cookieName ?? cookieName
  return {
    id: "password-session",
    outboundHosts: [],
    securitySchemes: {
      "password-session": { type: "apiKey", in: "cookie", name, description: `The signed session issued at login, as the \`${name}\` cookie.` }
    },
    authenticate: ({ headers }) => {
      const value = AuthStrategy.readCookie(headers, name)
      if (value === undefined || value.length === 0) return Effect.succeed(AuthStrategy.Verdict.NoMatch())
      return verifySession(value, options.secret).pipe(
        Effect.map((subject) => AuthStrategy.Verdict.Authenticated({ subject })),
        Effect.catchAll((error) => Effect.succeed(AuthStrategy.Verdict.Failed({ reason: error.message })))
      )
    }
  }
}

export { SessionInvalid, SessionSecretTooShort } from "./Errors.js"
