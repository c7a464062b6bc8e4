/**
 * The REST benchmark's routes: an fw REST route (params decode, a guard, ETag) and a bare
 * `HttpLayerRouter` route doing the same work (the same auth strategy, decode, scope check, encode
 * and ETag), both answering `GET …/items/:id` for `Authorization: Bearer bench`.
 */
import { FetchHttpClient, HttpClient, HttpLayerRouter, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Schema } from "effect"
import { createHash } from "node:crypto"
import { defineApp } from "../../src/app/App.js"
import { requireScope } from "../../src/app/Guard.js"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as Subject from "../../src/kernel/Subject.js"

const Item = Schema.Struct({ id: Schema.String, name: Schema.String, price: Schema.Number })
const Params = Schema.Struct({ id: Schema.String.pipe(Schema.minLength(1)) })
const item = (id: string) => ({ id, name: `item ${id}`, price: 3 })
const subject = Subject.make({ type: "user", id: "bench", tenantId: "t1", scopes: ["items:read"] })

/** The bearer-token strategy both routes authenticate with. */
export const auth: AuthStrategy.AuthStrategy = {
  id: "bench",
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.succeed(
      AuthStrategy.readBearer(headers) === "bench" ? AuthStrategy.Verdict.Authenticated({ subject }) : AuthStrategy.Verdict.NoMatch()
    )
}

/** The app with the fw route at `/items/:id`. */
export const app = defineApp({
  name: "bench",
  auth: [auth],
  restRoutes: [defineRestRoute({
    method: "GET",
    path: "/items/:id",
    input: Schema.Struct({ params: Params }),
    output: Item,
    etag: true,
    guards: [requireScope("items:read")],
    handler: ({ params }) => Effect.succeed(item(params.id))
  })]
})

const decodeParams = Schema.decodeUnknown(Params)
const encodeItem = Schema.encode(Item)

/** The bare route at `/bare/items/:id`. */
export const bare = HttpLayerRouter.use((router) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    yield* router.add(
      "GET",
      "/bare/items/:id",
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const verdict = yield* auth.authenticate({ headers: request.headers }).pipe(
          Effect.provideService(HttpClient.HttpClient, client)
        )
        const caller = verdict._tag === "Authenticated" ? verdict.subject : Subject.anonymous
        const params = yield* decodeParams(yield* HttpRouter.params)
        if (!Subject.hasScope(caller, "items:read")) return HttpServerResponse.empty({ status: 403 })
        const body = JSON.stringify(yield* encodeItem(item(params.id)))
        const etag = `W/"${createHash("sha1").update(body).digest("hex")}"`
        if (request.headers["if-none-match"] === etag) return HttpServerResponse.empty({ status: 304, headers: { etag } })
        return HttpServerResponse.text(body, { contentType: "application/json", headers: { etag } })
      }).pipe(Effect.orElseSucceed(() => HttpServerResponse.empty({ status: 400 })))
    )
  })
).pipe(Layer.provide(FetchHttpClient.layer))
