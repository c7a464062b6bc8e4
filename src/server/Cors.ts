/**
 * CORS (`http.cors`): pages on other origins may call the app's REST routes, projections,
 * `POST /rpc` and SSE streams. Off by default. A request whose `Origin` is allowed gets
 * `Access-Control-Allow-Origin` (and `-Credentials` when configured) on its answer; a preflight
 * (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin is answered 204 here,
 * before routing. Other origins get no CORS headers, so their browser withholds the answer.
 *
 * The inspect surface (`/_fw/…`) is never opened to other origins. The WebSocket transport is
 * not concerned: browsers do not apply CORS to sockets (`CrossSite` screens the upgrade).
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import type * as App from "../app/App.js"
import * as Now from "../kernel/Now.js"

/** The methods a preflight may ask for. */
const methods = "GET, HEAD, POST, PUT, PATCH, DELETE"

/** Response headers a page may read besides the CORS-safelisted ones (fw's own answers use them). */
const exposed = "etag, location, allow, deprecation, sunset, link, retry-after"

/** How long a browser may cache a preflight answer (seconds). */
const preflightMaxAge = "600"

/** The `Access-Control-Allow-Origin` value for `origin`, or undefined when it is not allowed. */
export const allowOrigin = (cors: App.Cors, origin: string): string | undefined =>
  cors.origins === "*" ? "*" : cors.origins.has(origin) ? origin : undefined

/** The headers of an answer to an allowed origin. */
const answerHeaders = (cors: App.Cors, allowed: string): Record<string, string> => ({
  "access-control-allow-origin": allowed,
  ...(cors.credentials ? { "access-control-allow-credentials": "true" } : {}),
  "access-control-expose-headers": exposed
})

const concerned = (url: string) => !url.startsWith("/_fw/")

/** Adds `Origin` to the answer's `Vary`, keeping what it varies on already. */
const varyOnOrigin = (response: HttpServerResponse.HttpServerResponse) => {
  const current = response.headers["vary"]
  return HttpServerResponse.setHeader(response, "vary", current === undefined || current === "" ? "Origin" : `${current}, Origin`)
}

/**
 * CORS for `cors` around `answer`, the answer to `request` (eager: an answer given at once stays
 * one, see `DirectRoute.Edge`).
 */
export const edge = (cors: App.Cors) =>
<E, R>(
  request: HttpServerRequest.HttpServerRequest,
  answer: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> => {
  const origin = request.headers["origin"]
  const allowed = origin === undefined || !concerned(request.url) ? undefined : allowOrigin(cors, origin)
  // Answers depend on Origin whenever origins are listed: caches must key on it.
  const vary = cors.origins === "*" ? {} : { vary: "Origin" }
  const varied = (response: HttpServerResponse.HttpServerResponse) => cors.origins === "*" ? response : varyOnOrigin(response)
  if (allowed === undefined) return Now.map(answer, varied)
  if (request.method === "OPTIONS" && request.headers["access-control-request-method"] !== undefined) {
    return Effect.succeed(HttpServerResponse.empty({
      status: 204,
      headers: {
        ...answerHeaders(cors, allowed),
        ...vary,
        "access-control-allow-methods": methods,
        "access-control-allow-headers": cors.headers.join(", "),
        "access-control-max-age": preflightMaxAge
      }
    }))
  }
  return Now.map(answer, (response) => varied(HttpServerResponse.setHeaders(response, answerHeaders(cors, allowed))))
}

/** Wraps the listener's handler with CORS for `cors`. */
export const middleware = (cors: App.Cors) => {
  const around = edge(cors)
  return <E, R>(
    httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => around(request, httpEffect))
}
