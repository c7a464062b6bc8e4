/**
 * The inspect dashboard at `/_fw/dashboard`: a page served by the framework (offline, no CDN) over
 * the inspect surface. The page and its script hold no data and exist only while the surface is
 * enabled (`FW_INSPECT_TOKEN` set); the operator enters the inspect token, which the page keeps in
 * the tab's session storage and sends as a bearer token to the gated `/_fw/inspect/*` routes.
 *
 * Panels of installed plugins (`Plugin.dashboardPanel`) are listed at
 * `GET /_fw/inspect/dashboard/panels` and their modules served, gated, at `…/panels/<plugin>`.
 */
import { HttpLayerRouter, HttpRouter, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Option } from "effect"
import * as HttpResponses from "../app/HttpResponses.js"
import { Runtime, type RuntimeShape } from "../app/Runtime.js"
import * as DashboardAssets from "./DashboardAssets.js"
import * as Inspect from "./Inspect.js"

/** Where the dashboard is served. */
export const path = "/_fw/dashboard"

/** The page may load only itself and blob modules (plugin panels), and talk only to its origin. */
const pageHeaders = {
  "content-security-policy":
    "default-src 'none'; script-src 'self' blob:; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store"
}

const disabled = HttpResponses.error(404, "InspectDisabled", "the inspect surface is disabled: set FW_INSPECT_TOKEN")

/**
 * Serves `response` while the inspect surface is enabled (a token is configured) or to an operator
 * signed in through the app's own strategies; else the surface's 404.
 */
const whileEnabled = (runtime: RuntimeShape, response: () => HttpServerResponse.HttpServerResponse) =>
  Effect.flatMap(Inspect.token, (token) =>
    Option.isSome(token)
      ? Effect.sync(response)
      : Effect.map(Inspect.operator(runtime), (gate) => Either.isRight(gate) ? response() : disabled))

/** The dashboard page, its script, and the gated panel routes. */
export const routes = HttpLayerRouter.use((router) =>
  Effect.gen(function*() {
    const runtime = yield* Runtime
    const panels = runtime.app.plugins.flatMap((plugin) =>
      plugin.dashboardPanel === undefined ? [] : [{ plugin: plugin.name, ...plugin.dashboardPanel }]
    )
    yield* router.add("GET", path, whileEnabled(runtime, () => HttpServerResponse.html(DashboardAssets.html).pipe(HttpServerResponse.setHeaders(pageHeaders))))
    yield* router.add(
      "GET",
      `${path}/app.js`,
      whileEnabled(runtime, () =>
        HttpServerResponse.text(DashboardAssets.script, { contentType: "text/javascript; charset=utf-8" }).pipe(
          HttpServerResponse.setHeaders(pageHeaders)
        )
      )
    )
    yield* router.add(
      "GET",
      `${Inspect.prefix}/dashboard/panels`,
      Inspect.gated(runtime, Effect.succeed(HttpServerResponse.unsafeJson({
        panels: panels.map(({ plugin, title }) => ({ plugin, title }))
      })))
    )
    yield* router.add(
      "GET",
      `${Inspect.prefix}/dashboard/panels/:plugin`,
      Inspect.gated(runtime, Effect.gen(function*() {
        const { plugin } = yield* HttpRouter.params
        const panel = panels.find((candidate) => candidate.plugin === plugin)
        if (panel === undefined) return HttpResponses.error(404, "PanelNotFound", `no dashboard panel for plugin "${plugin}"`)
        return HttpServerResponse.text(panel.module, { contentType: "text/javascript; charset=utf-8" }).pipe(
          HttpServerResponse.setHeaders({ "x-content-type-options": "nosniff", "cache-control": "no-store" })
        )
      }))
    )
  })
)
