import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import { idpAHostedLoginPlugin } from "../../src/auth/HostedLogin.js"
import { passwordSessionStrategy } from "../../src/auth/Session.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import * as Serve from "../support/Serve.js"

const sessionSecret = "hosted-login-session-secret-0123456789"

/** A loopback stand-in for provider A's API: authorize (redirects back with a code), code exchange, JWKS. */
const standIn = Effect.acquireRelease(
  Effect.promise(async () => {
    const challenges = new Map<string, string>()
    let failExchange = false
    let exchanges = 0
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://standin")
      if (url.pathname === "/user_management/authorize") {
        const code = `code-${challenges.size}`
        challenges.set(code, url.searchParams.get("code_challenge") ?? "")
        const back = new URL(url.searchParams.get("redirect_uri")!)
        back.searchParams.set("code", code)
        back.searchParams.set("state", url.searchParams.get("state")!)
        assert.strictEqual(url.searchParams.get("provider"), "authkit")
        assert.strictEqual(url.searchParams.get("code_challenge_method"), "S256")
        res.writeHead(302, { location: back.toString() }).end()
        return
      }
      if (url.pathname === "/user_management/authenticate" && req.method === "POST") {
        let body = ""
        req.on("data", (chunk) => body += chunk)
        req.on("end", () => {
          exchanges++
          const input = JSON.parse(body) as Record<string, string>
          const challenge = createHash("sha256").update(input.code_verifier ?? "").digest("base64url")
          const ok = !failExchange && input.client_secret === "sk_test" && input.client_id === "client_1" &&
            input.grant_type === "authorization_code" && challenges.get(input.code ?? "") === challenge
          res.writeHead(ok ? 200 : 400, { "content-type": "application/json" }).end(JSON.stringify(ok
            ? { user: { id: "user_01", email: "ada@acme.test", first_name: "Ada", last_name: "L" }, organization_id: "org_01", access_token: "at" }
            : { error: "invalid_grant" }))
        })
        return
      }
      res.writeHead(404).end()
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      server,
      failNextExchanges: (fail: boolean) => void (failExchange = fail),
      exchanges: () => exchanges
    }
  }),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

const whoAmI = query("auth.whoAmI", {
  input: Schema.Struct({}),
  output: Schema.Struct({ id: Schema.String, tenantId: Schema.NullOr(Schema.String) }),
  handler: (_, { subject }) => Effect.succeed({ id: subject.id, tenantId: subject.tenantId })
})

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const get = (url: string, cookies: ReadonlyArray<string> = []) =>
  Effect.promise(async () => {
    const response = await fetch(url, { redirect: "manual", headers: cookies.length ? { cookie: cookies.join("; ") } : {} })
    return {
      status: response.status,
      location: response.headers.get("location"),
      setCookies: response.headers.getSetCookie(),
      body: await response.text()
    }
  })

const cookiePairs = (setCookies: ReadonlyArray<string>) => setCookies.map((c) => c.split(";")[0]!).filter((c) => !c.endsWith("="))

describe("hosted login for provider A", () => {
  it.scopedLive("a round trip sets the session, provisions once and finds by email after; errors map to 400, 502 and 503", () =>
    Effect.gen(function*() {
      const provider = yield* standIn
      const app = defineApp({
        name: "login",
        procedures: [whoAmI],
        plugins: [idpAHostedLoginPlugin({ sessionSecret, apiBaseUrl: provider.url, landingPath: "/home" })],
        auth: [passwordSessionStrategy({ secret: sessionSecret })]
      })
      delete process.env.IDP_A_CLIENT_ID
      const served = yield* Serve.serve(app, memory)
      assert.strictEqual((yield* get(`${served.url}/auth/idp_a/login`)).status, 503)
      assert.strictEqual((yield* get(`${served.url}/auth/idp_a/callback?code=x&state=y`)).status, 503)
      process.env.IDP_A_CLIENT_ID = "client_1"
      process.env.IDP_A_API_KEY = "sk_test"
      process.env.IDP_A_REDIRECT_URI = `${served.url}/auth/idp_a/callback`
      const client = yield* Serve.httpClient(served, app)

      const logIn = Effect.gen(function*() {
        const start = yield* get(`${served.url}/auth/idp_a/login`)
        assert.strictEqual(start.status, 302)
        assert.isTrue(start.location!.startsWith(`${provider.url}/user_management/authorize?`))
        for (const name of ["idp_a-oauth-state", "idp_a-oauth-verifier"]) {
          const cookie = start.setCookies.find((c) => c.startsWith(`${name}=`))!
          assert.match(cookie, /Max-Age=600/)
          assert.match(cookie, /Path=\//)
          assert.match(cookie, /HttpOnly/)
          assert.match(cookie, /SameSite=Lax/)
        }
        const atProvider = yield* get(start.location!)
        const done = yield* get(atProvider.location!, cookiePairs(start.setCookies))
        assert.strictEqual(done.status, 302)
        assert.strictEqual(done.location, "/home")
        const session = done.setCookies.find((c) => c.startsWith("fw:session="))!
        assert.match(session, /Max-Age=604800/)
        assert.match(session, /SameSite=Lax/)
        return yield* client.call(whoAmI, {}, { headers: { cookie: session.split(";")[0]! } })
      })
      const first = yield* logIn
      assert.notStrictEqual(first.id, "anonymous")
      assert.isString(first.tenantId)
      const second = yield* logIn
      assert.deepStrictEqual(second, first)

      // State mismatch, missing code, missing cookie: 400. A failing exchange: 502.
      const start = yield* get(`${served.url}/auth/idp_a/login`)
      const atProvider = yield* get(start.location!)
      const forged = atProvider.location!.replace(/state=[^&]+/, "state=forged")
      const mismatch = yield* get(forged, cookiePairs(start.setCookies))
      assert.deepStrictEqual([mismatch.status, mismatch.body], [400, "the login state does not match"])
      assert.strictEqual((yield* get(`${served.url}/auth/idp_a/callback?state=x`, cookiePairs(start.setCookies))).status, 400)
      assert.strictEqual((yield* get(atProvider.location!)).status, 400)
      provider.failNextExchanges(true)
      const failed = yield* get(atProvider.location!, cookiePairs(start.setCookies))
      assert.strictEqual(failed.status, 502)
      assert.notInclude(failed.body, "sk_test")
      assert.isFalse(failed.setCookies.some((c) => c.startsWith("fw:session=")))
    }))
})
