/**
 * Accounts and the password login of the example: a `users` table holding scrypt password hashes,
 * `POST /signup` (a new user in a workspace, a tenant, of their own), `POST /login` (checks the
 * password), both setting the `fw:session` cookie with `issueSession`, and `POST /logout`. `passwordSessionStrategy` (in `app.ts`) reads that cookie on every request and on
 * the WebSocket upgrade.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Layer, Option, Schema } from "effect"
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto"
import { definePlugin, defineTable, Plugin, Store, Subject } from "@fw/framework"
import { clearSessionCookie, issueSession, sessionCookie } from "@fw/framework/auth"

/**
 * One row per user. No `tenantField`: a login looks the user up by email before any tenant is
 * known, and only the login route (system code) reads it; no procedure exposes it.
 */
export const Users = defineTable("users", {
  fields: {
    email: Schema.String,
    name: Schema.String,
    tenantId: Schema.String,
    /** `scrypt$<salt hex>$<hash hex>`. */
    passwordHash: Schema.String,
    scopes: Schema.Array(Schema.String)
  },
  indexes: [["email"]]
})

const derive = (password: string, salt: Buffer) =>
  Effect.async<Buffer>((resume) => {
    scrypt(password, salt, 32, (error, key) => resume(error ? Effect.die(error) : Effect.succeed(key)))
  })

/** Hashes a password with a fresh random salt. */
export const hashPassword = (password: string) =>
  Effect.gen(function*() {
    const salt = randomBytes(16)
    const key = yield* derive(password, salt)
    return `scrypt$${salt.toString("hex")}$${key.toString("hex")}`
  })

/** Whether `password` matches `stored` (compared in constant time). */
export const verifyPassword = (password: string, stored: string) =>
  Effect.gen(function*() {
    const [scheme, salt, hash] = stored.split("$")
    if (scheme !== "scrypt" || salt === undefined || hash === undefined) return false
    const expected = Buffer.from(hash, "hex")
    const key = yield* derive(password, Buffer.from(salt, "hex"))
    return key.length === expected.length && timingSafeEqual(key, expected)
  })

/** The accounts seeded on first start: two tenants, so each user sees only their own notes. */
export const demoUsers = [
  { email: "alice@acme.test", name: "Alice", tenantId: "acme", password: "alice-password" },
  { email: "avery@acme.test", name: "Avery", tenantId: "acme", password: "avery-password" },
  { email: "bob@globex.test", name: "Bob", tenantId: "globex", password: "bob-password" }
] as const

const LoginBody = Schema.parseJson(Schema.Struct({ email: Schema.String, password: Schema.String }))

const SignUpBody = Schema.parseJson(Schema.Struct({
  name: Schema.Trim.pipe(Schema.minLength(1), Schema.maxLength(80)),
  email: Schema.Trim.pipe(Schema.maxLength(254), Schema.pattern(/^[^\s@]+@[^\s@]+$/u)),
  password: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(200))
}))

const refuse = (status: number, tag: string, message: string) => HttpServerResponse.unsafeJson({ _tag: tag, message }, { status })

/**
 * The body of a credentials request as `schema` decodes it, or the refusal to answer. JSON only: a
 * cross-site form cannot send it without a CORS preflight (no login CSRF).
 */
const readCredentials = <A>(schema: Schema.Schema<A, string>, expected: string) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!(request.headers["content-type"] ?? "").startsWith("application/json")) {
      return Either.left(refuse(415, "UnsupportedMediaType", "send the credentials as application/json"))
    }
    const body = Schema.decodeUnknownOption(schema)(new TextDecoder().decode(yield* Plugin.readBody))
    return Option.isNone(body) ? Either.left(refuse(400, "CredentialsInvalid", expected)) : Either.right(body.value)
  })

/** Answers with the user and the session cookie that signs them in. */
const signIn = (user: typeof Users.schema.Type, secret: string) =>
  Effect.gen(function*() {
    const subject = Subject.make({
      type: "user",
      id: user.id,
      tenantId: user.tenantId,
      scopes: user.scopes,
      metadata: { name: user.name }
    })
    const session = yield* issueSession(subject, secret)
    return HttpServerResponse.unsafeJson({ id: user.id, name: user.name, tenantId: user.tenantId }).pipe(
      HttpServerResponse.setHeader("set-cookie", sessionCookie(session))
    )
  })

/** Checks the password and answers with the session cookie; any mismatch is the same 401. */
const login = (secret: string) =>
  Effect.gen(function*() {
    const body = yield* readCredentials(LoginBody, "expected {email, password}")
    if (Either.isLeft(body)) return body.left
    const store = yield* Store.Store
    const [user] = yield* store.find(Users, { where: { email: body.right.email.toLowerCase() }, limit: 1 })
    const matches = user !== undefined && (yield* verifyPassword(body.right.password, user.passwordHash))
    if (user === undefined || !matches) return refuse(401, "LoginFailed", "wrong email or password")
    return yield* signIn(user, secret)
  })

/**
 * Creates the user in a new workspace of their own (a fresh tenant: nobody joins another's notes by
 * claiming an address), then signs them in. An address already taken is a 409.
 */
const signUp = (secret: string) =>
  Effect.gen(function*() {
    const body = yield* readCredentials(SignUpBody, "expected {name, email, password}: a name, an email address, a password of at least 8 characters")
    if (Either.isLeft(body)) return body.left
    const store = yield* Store.Store
    const email = body.right.email.toLowerCase()
    // Check, then insert: two sign-ups racing with one address could both pass (the store has no
    // unique index to refuse the second); a production app would enforce it in the database.
    if ((yield* store.count(Users, { where: { email } })) > 0) return refuse(409, "EmailTaken", "an account with this email exists: sign in")
    const user = yield* store.insert(Users, {
      email,
      name: body.right.name,
      tenantId: `ws-${randomBytes(6).toString("hex")}`,
      passwordHash: yield* hashPassword(body.right.password),
      scopes: ["notes:write"]
    })
    return yield* signIn(user, secret)
  })

/** Seeds `demoUsers` into an empty `users` table (at start, after the schema is applied). */
const seed = Layer.effectDiscard(Effect.gen(function*() {
  const store = yield* Store.Store
  if ((yield* store.count(Users)) > 0) return
  for (const user of demoUsers) {
    yield* store.insert(Users, {
      email: user.email,
      name: user.name,
      tenantId: user.tenantId,
      passwordHash: yield* hashPassword(user.password),
      scopes: ["notes:write"]
    })
  }
}))

/**
 * The accounts plugin: the `users` table, its seed, and the sign-up, login and logout routes. The routes are
 * `anonymous` so that a stale or forged cookie (a failed verdict, 401 elsewhere) never locks a user
 * out of the route that replaces it.
 */
export const accountsPlugin = (secret: string) =>
  definePlugin({
    name: "accounts",
    permissions: ["store:write"],
    tables: [Users],
    layer: seed,
    routes: [
      { method: "POST", path: "/signup", anonymous: true, handler: signUp(secret) },
      { method: "POST", path: "/login", anonymous: true, handler: login(secret) },
      {
        method: "POST",
        path: "/logout",
        anonymous: true,
        handler: Effect.succeed(HttpServerResponse.empty({ status: 204 }).pipe(HttpServerResponse.setHeader("set-cookie", clearSessionCookie())))
      }
    ]
  })
