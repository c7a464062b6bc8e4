/**
 * The app's HTTP API: REST routes and projected procedures through the pipeline, 405 answers on
 * their paths, the OpenAPI document at `/openapi.json` and a docs page at `/docs`.
 */
import { HttpApiScalar, HttpLayerRouter, HttpServerResponse, OpenApi } from "@effect/platform"
import { Effect, Layer } from "effect"
import type { App } from "../app/App.js"
import { Runtime } from "../app/Runtime.js"
import * as Idempotency from "./Idempotency.js"
import * as OpenApiDocument from "./OpenApiDocument.js"
import * as Pipeline from "./Pipeline.js"
import * as Projection from "./Projection.js"

/** The REST routes, the projections and the OpenAPI document of `app`. */
export const routes = (app: App, maxBodyBytes: number) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const runtime = yield* Runtime
    const all = [...app.restRoutes, ...Projection.routes(app.procedures.values(), runtime)]
    const api = OpenApiDocument.api(app.name, all)
    const document = OpenApi.fromApi(api)
    return Layer.mergeAll(
      Pipeline.routes(all, maxBodyBytes, Idempotency.settingsOf(app.idempotency)),
      HttpLayerRouter.add("GET", "/openapi.json", Effect.succeed(HttpServerResponse.unsafeJson(document))),
      // The docs page ships its viewer inline: it works without network access.
      HttpApiScalar.layerHttpLayerRouter({ api, path: "/docs" })
    )
  }))
