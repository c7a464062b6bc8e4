/**
 * A loopback stand-in for provider A's API (notes/auth-providers-saml.md §1.1): the hosted-login
 * authorize endpoint (redirects straight back with a code, as after a successful login), the code
 * exchange (checks the client, the API key and the PKCE verifier; answers the user, the
 * organisation and an access token in the provider's shape), and the JWKS publishing its key.
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as Idp from "./Idp.js"

/** The user the stand-in logs in. */
export interface User {
  readonly id: string
  readonly email: string
  readonly firstName: string
  readonly lastName: string
  readonly organizationId: string | null
  /** What the provider says of the address (default verified). */
  readonly emailVerified?: boolean
}

export const clientId = "client_1"
export const apiKey = "sk_test_stand_in"

/** Starts the stand-in on 127.0.0.1 (port 0) for the scope. */
export const start = Effect.gen(function*() {
  const key = yield* Idp.generateKey("RS256", "sso_key_1")
  let user: User = { id: "user_01", email: "ada@acme.test", firstName: "Ada", lastName: "Lovelace", organizationId: "org_01" }
  let failing = false
  let exchanges = 0
  const codes = new Map<string, { readonly challenge: string; readonly user: User }>()
  const tokens: Array<Promise<string>> = []
  const server = yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const server = createServer((req, res) => {
        const url = new URL(req.url ?? "/", "http://stand-in")
        if (req.method === "GET" && url.pathname === "/user_management/authorize") {
          const params = url.searchParams
          const valid = params.get("client_id") === clientId && params.get("response_type") === "code" &&
            params.get("provider") === "authkit" && params.get("code_challenge_method") === "S256" &&
            (params.get("state") ?? "").length >= 32 && (params.get("code_challenge") ?? "").length === 43
          if (!valid) return void res.writeHead(400).end("bad authorize request")
          const code = `code_${crypto.randomUUID()}`
          codes.set(code, { challenge: params.get("code_challenge")!, user })
          const back = new URL(params.get("redirect_uri")!)
          back.searchParams.set("code", code)
          back.searchParams.set("state", params.get("state")!)
          return void res.writeHead(302, { location: back.toString() }).end()
        }
        if (req.method === "POST" && url.pathname === "/user_management/authenticate") {
          let body = ""
          req.on("data", (chunk) => (body += chunk))
          req.on("end", () => {
            exchanges++
            const input = JSON.parse(body) as Record<string, string | undefined>
            const issued = codes.get(input.code ?? "")
            const verifierMatches = issued !== undefined &&
              createHash("sha256").update(input.code_verifier ?? "").digest("base64url") === issued.challenge
            if (failing || !verifierMatches || input.client_id !== clientId || input.client_secret !== apiKey || input.grant_type !== "authorization_code") {
              return void res.writeHead(400, { "content-type": "application/json" })
                .end(JSON.stringify({ error: "invalid_grant", error_description: "The code is invalid." }))
            }
            // Codes are single-use.
            codes.delete(input.code!)
            const loggedIn = issued.user
            const token = Idp.sign(key, {
              sub: loggedIn.id,
              iss: `${address}/user_management/${clientId}`,
              sid: "session_01",
              org_id: loggedIn.organizationId ?? undefined,
              role: "member",
              permissions: ["notes:read"],
              exp: Idp.nowSeconds() + 300
            }).pipe(Effect.runPromise)
            tokens.push(token)
            void token.then((accessToken) =>
              res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
                user: {
                  object: "user",
                  id: loggedIn.id,
                  email: loggedIn.email,
                  email_verified: loggedIn.emailVerified ?? true,
                  first_name: loggedIn.firstName,
                  last_name: loggedIn.lastName,
                  profile_picture_url: null,
                  created_at: "2026-01-01T00:00:00.000Z",
                  updated_at: "2026-01-01T00:00:00.000Z"
                },
                organization_id: loggedIn.organizationId ?? undefined,
                access_token: accessToken,
                refresh_token: "refresh_01",
                authentication_method: "Password"
              }))
            )
          })
          return
        }
        if (req.method === "GET" && url.pathname === `/sso/jwks/${clientId}`) {
          res.setHeader("content-type", "application/json")
          return void res.end(JSON.stringify({ keys: [Idp.publicJwk(key.privateJwk)] }))
        }
        res.writeHead(404).end()
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
      return server
    }),
    (server) => Effect.promise(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))))
  )
  const address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url: address,
    /** The user the next login returns. */
    logInAs: (next: User) => void (user = next),
    /** Makes every exchange fail (400 invalid_grant). */
    failExchanges: (fail: boolean) => void (failing = fail),
    exchanges: () => exchanges,
    /** The access tokens handed out, in order. */
    accessTokens: () => Effect.promise(() => Promise.all(tokens))
  }
})
