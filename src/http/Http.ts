/**
 * The app's HTTP API: REST routes and projected procedures as `@effect/platform` HttpApi endpoints,
 * with the OpenAPI document at `/openapi.json`.
 */
import { HttpApi, HttpLayerRouter, HttpServerResponse, OpenApi } from "@effect/platform"
import { Effect } from "effect"
import type { App } from "../app/App.js"

/** The HttpApi of an app (its document is what `/openapi.json` serves). */
export const api = (app: App) => HttpApi.make(app.name).annotate(OpenApi.Title, app.name)

/** The REST routes, the projections and the OpenAPI document of `app`. */
export const routes = (app: App, _maxBodyBytes: number) =>
  HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const document = OpenApi.fromApi(api(app))
      yield* router.add("GET", "/openapi.json", Effect.succeed(HttpServerResponse.unsafeJson(document)))
    })
  )
