/**
 * The app's HTTP API: REST routes through the pipeline, 405 answers on their paths, and the
 * OpenAPI document at `/openapi.json`.
 */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import type { App } from "../app/App.js"
import * as Idempotency from "./Idempotency.js"
import * as OpenApiDocument from "./OpenApiDocument.js"
import * as Pipeline from "./Pipeline.js"

/** The OpenAPI document of `app`. */
export const document = (app: App) => OpenApiDocument.make(app.name, app.restRoutes)

/** The REST routes and the OpenAPI document of `app`. */
export const routes = (app: App, maxBodyBytes: number) =>
  Layer.merge(
    Pipeline.routes(app.restRoutes, maxBodyBytes, Idempotency.settingsOf(app.idempotency)),
    HttpLayerRouter.use((router) => {
      const openapi = document(app)
      return router.add("GET", "/openapi.json", Effect.succeed(HttpServerResponse.unsafeJson(openapi)))
    })
  )
