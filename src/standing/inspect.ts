/**
 * Read-only inspect routes of the standing primitives, under `/_fw/inspect/plugins/standing`:
 * `GET /expectations`, `/budgets`, `/attribution`, `/breaches`, `/experiments`. Expectations and
 * experiments carry `words` for people (metric against threshold, the write behind the last
 * transition, the sample-ratio check as a sentence) and each non-baseline arm its lift's 95 %
 * `interval` (see `StandingWords`).
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import * as HttpResponses from "../app/HttpResponses.js"
import type * as Plugin from "../app/Plugin.js"
import type { Config, Engine } from "./Engine.js"
import * as Srm from "./Srm.js"
import * as StandingWords from "./StandingWords.js"

/** The inspect routes; `engine` finds the running engine of the route's store (undefined before boot: 503). */
export const routes = (
  engine: Effect.Effect<Engine | undefined, never, Plugin.Services>,
  config?: Config
): ReadonlyArray<Plugin.Route> => {
  const route = (path: `/${string}`, read: (engine: Engine) => Effect.Effect<unknown>): Plugin.Route => ({
    method: "GET",
    path,
    handler: Effect.flatMap(engine, (running) =>
      running === undefined
        ? Effect.succeed(HttpResponses.error(503, "StandingNotReady", "the standing primitives have not booted yet"))
        : Effect.map(read(running), (body) => HttpServerResponse.unsafeJson(body)))
  })
  const columnOf = (name: string) => {
    const invariant = config?.expectations.find((e) => e.name === name)?.invariant
    return invariant === undefined || invariant.kind === "rowCount" ? null : invariant.column
  }
  return [
    route("/expectations", (running) =>
      Effect.map(running.expectations.snapshot(), (observations) =>
        observations.map((observation) => ({
          ...observation,
          words: { ...StandingWords.expectation(observation, { column: columnOf(observation.name) }), cause: StandingWords.cause(observation.lastCause) }
        })))),
    route("/budgets", (running) => running.costs.budgets()),
    route("/attribution", (running) => running.costs.attribution()),
    route("/breaches", (running) => running.costs.breaches()),
    route("/experiments", (running) =>
      Effect.map(running.experiments.snapshot(), (readouts) =>
        readouts.map((readout) => {
          const experiment = config?.experiments.find((e) => e.name === readout.name)
          return {
            ...readout,
            variants: readout.variants.map((arm) => ({ ...arm, interval: StandingWords.liftInterval(readout, arm) })),
            words: {
              metric: experiment === undefined ? readout.metric : StandingWords.metricWords(experiment),
              srm: StandingWords.srm(readout.srm, Srm.threshold)
            }
          }
        })))
  ]
}
