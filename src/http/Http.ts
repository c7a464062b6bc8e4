/**
 * The app's HTTP API: REST routes and projected procedures through the pipeline, 405 answers on
 * their paths, and the OpenAPI document at `/openapi.json`.
 */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
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
    const document = OpenApiDocument.make(app.name, all)
    return Layer.merge(
      Pipeline.routes(all, maxBodyBytes, Idempotency.settingsOf(app.idempotency)),
      HttpLayerRouter.add("GET", "/openapi.json", Effect.succeed(HttpServerResponse.unsafeJson(document)))
    )
  }))
