/**
 * Read-only inspect routes of the standing primitives, under `/_fw/inspect/plugins/standing`:
 * `GET /expectations`, `/budgets`, `/attribution`, `/breaches`, `/experiments`.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import * as HttpResponses from "../app/HttpResponses.js"
import type * as Plugin from "../app/Plugin.js"
import type { Engine } from "./Engine.js"

/** The inspect routes; `engine` finds the running engine of the route's store (undefined before boot: 503). */
export const routes = (engine: Effect.Effect<Engine | undefined, never, Plugin.Services>): ReadonlyArray<Plugin.Route> => {
  const route = (path: `/${string}`, read: (engine: Engine) => Effect.Effect<unknown>): Plugin.Route => ({
    method: "GET",
    path,
    handler: Effect.flatMap(engine, (running) =>
      running === undefined
        ? Effect.succeed(HttpResponses.error(503, "StandingNotReady", "the standing primitives have not booted yet"))
        : Effect.map(read(running), (body) => HttpServerResponse.unsafeJson(body)))
  })
  return [
    route("/expectations", (running) => running.expectations.snapshot()),
    route("/budgets", (running) => running.costs.budgets()),
    route("/attribution", (running) => running.costs.attribution()),
    route("/breaches", (running) => running.costs.breaches()),
    route("/experiments", (running) => running.experiments.snapshot())
  ]
}
