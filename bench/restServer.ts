/**
 * The server side of the REST benchmark: an fw REST route (decode, a guard, ETag) and a bare
 * HttpLayerRouter route doing the same work, on one listener. Prints the port.
 */
import { HttpLayerRouter, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import * as AuthStrategy from "../src/auth/AuthStrategy.js"
import { defineApp } from "../src/app/App.js"
import { requireScope } from "../src/app/Guard.js"
import * as Server from "../src/app/Server.js"
import { defineRestRoute } from "../src/http/RestRoute.js"
import * as ChangeTap from "../src/kernel/ChangeTap.js"
import * as Store from "../src/kernel/Store.js"
import * as Subject from "../src/kernel/Subject.js"

const Item = Schema.Struct({ id: Schema.String, name: Schema.String, price: Schema.Number })
const Params = Schema.Struct({ id: Schema.String.pipe(Schema.minLength(1)) })
const item = (id: string) => ({ id, name: `item ${id}`, price: 3 })
const subject = Subject.make({ type: "user", id: "bench", tenantId: "t1", scopes: ["items:read"] })

const auth: AuthStrategy.AuthStrategy = {
  id: "bench",
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.succeed(headers["authorization"] === "Bearer bench" ? AuthStrategy.Verdict.Authenticated({ subject }) : AuthStrategy.Verdict.NoMatch())
}
const getItem = defineRestRoute({
  method: "GET",
  path: "/items/:id",
  input: Schema.Struct({ params: Params }),
  output: Item,
  etag: true,
  guards: [requireScope("items:read")],
  handler: ({ params }) => Effect.succeed(item(params.id))
})
const app = defineApp({ restRoutes: [getItem], auth: [auth] })

const decodeParams = Schema.decodeUnknown(Params)
const encodeItem = Schema.encode(Item)
const bare = HttpLayerRouter.add(
  "GET",
  "/bare/items/:id",
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (request.headers["authorization"] !== "Bearer bench" || !Subject.hasScope(subject, "items:read")) {
      return HttpServerResponse.empty({ status: 403 })
    }
    const params = yield* decodeParams(yield* HttpRouter.params)
    const body = JSON.stringify(yield* encodeItem(item(params.id)))
    const etag = `W/"${createHash("sha1").update(body).digest("hex")}"`
    if (request.headers["if-none-match"] === etag) return HttpServerResponse.empty({ status: 304, headers: { etag } })
    return HttpServerResponse.text(body, { contentType: "application/json", headers: { etag } })
  }).pipe(Effect.orElseSucceed(() => HttpServerResponse.empty({ status: 400 })))
)

const Main = Layer.mergeAll(
  Server.layer(app, { routes: bare }),
  Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
    if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
  }))
).pipe(
  Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
  Layer.provide(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
)

Layer.launch(Main).pipe(NodeRuntime.runMain)
