/**
 * The login-only model and the verify model stacked (spec 5.1 rule 4): the password session first,
 * then a provider strategy, resolved by the app's transports.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import { jwtBearerStrategy } from "../../src/auth/IdentityProviders.js"
import * as Session from "../../src/auth/Session.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Serve from "../support/Serve.js"
import * as Idp from "./support/Idp.js"
import { bearer } from "./support/Verdicts.js"

describe("composed strategies over the rpc socket, POST /rpc and a REST route", () => {
  it.scopedLive("password session first, then a provider: the token rides in each message; a bad token stops the chain", () =>
    Effect.gen(function*() {
      const secret = "compose-session-secret-0123456789abcdef"
      const key = yield* Idp.generateKey("ES256", "es")
      const jwks = yield* Idp.jwksServer([key])
      const whoAmI = query("auth.whoAmI", {
        input: Schema.Struct({}),
        output: Schema.Struct({ id: Schema.String, provider: Schema.NullOr(Schema.String) }),
        handler: (_, { subject }) =>
          Effect.succeed({ id: subject.id, provider: typeof subject.metadata.provider === "string" ? subject.metadata.provider : null })
      })
      const restWhoAmI = defineRestRoute({
        method: "GET",
        path: "/whoami",
        input: Schema.Struct({}),
        output: Schema.Struct({ id: Schema.String }),
        handler: (_, { subject }) => Effect.succeed({ id: subject.id })
      })
      const app = defineApp({
        procedures: [whoAmI],
        restRoutes: [restWhoAmI],
        auth: [
          Session.passwordSessionStrategy({ secret }),
          jwtBearerStrategy({ id: "idp", jwksUrl: jwks.url, issuer: "https://idp.test", audience: "api", tenantIdFromClaims: (c) => typeof c.org === "string" ? c.org : null })
        ]
      })
      const served = yield* Serve.serve(app, Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal)))
      const ws = yield* Serve.wsClient(served, app)
      const http = yield* Serve.httpClient(served, app)
      const cookie = `fw:session=${yield* Session.issueSession(Subject.make({ type: "user", id: "local-user", tenantId: "t" }), secret)}`
      const token = yield* Idp.sign(key, { sub: "idp-user", iss: "https://idp.test", aud: "api", org: "t", exp: Idp.nowSeconds() + 60 })
      assert.deepStrictEqual(yield* ws.call(whoAmI, {}, { headers: { cookie } }), { id: "local-user", provider: null })
      assert.deepStrictEqual(yield* ws.call(whoAmI, {}, { headers: bearer(token) }), { id: "idp-user", provider: "idp" })
      // Both present: the first strategy in the chain wins.
      assert.deepStrictEqual(yield* ws.call(whoAmI, {}, { headers: { cookie, ...bearer(token) } }), { id: "local-user", provider: null })
      // A tampered session fails the chain even though a valid bearer token follows.
      const stopped = yield* Effect.flip(ws.call(whoAmI, {}, { headers: { cookie: `${cookie}x`, ...bearer(token) } }))
      assert.strictEqual(stopped._tag, "Unauthenticated")
      assert.deepStrictEqual(yield* ws.call(whoAmI, {}), { id: "anonymous", provider: null })
      // The same chain over HTTP (POST /rpc), where the headers are the request's own.
      assert.deepStrictEqual(yield* http.call(whoAmI, {}, { headers: bearer(token) }), { id: "idp-user", provider: "idp" })
      assert.strictEqual((yield* Effect.flip(http.call(whoAmI, {}, { headers: { cookie: `${cookie}x`, ...bearer(token) } })))._tag, "Unauthenticated")
      // And on a REST route, resolved by the same chain.
      const rest = (headers: Record<string, string>) =>
        Effect.promise(async () => {
          const response = await fetch(`${served.url}/whoami`, { headers })
          return response.status === 200 ? ((await response.json()) as { id: string }).id : response.status
        })
      assert.strictEqual(yield* rest({ cookie }), "local-user")
      assert.strictEqual(yield* rest(bearer(token)), "idp-user")
      assert.strictEqual(yield* rest({ cookie, ...bearer(token) }), "local-user")
      assert.strictEqual(yield* rest({ cookie: `${cookie}x`, ...bearer(token) }), 401)
      assert.strictEqual(yield* rest({}), "anonymous")
    }))
})
