/**
 * The REST request pipeline (spec 4.5), in order:
 *
 * 1. method gate: the router; a method not mounted on a known path answers 405 with `Allow`
 *    (`MethodGate`); a cross-site or non-JSON request does not authenticate with its cookies
 *    (`CrossSite`: 403 when they alone would have), except a top-level navigation to a query or a
 *    hand-written route, never to a mutation or action;
 * 2. sunset gate: 410 with `{version, replacement}` from the sunset date (`Lifecycle`); then, for
 *    body methods, 415 for multipart and the body read within the path's cap, 413 past it
 *    (`Steps.prologue`);
 * 3. decode of `{query, params, body}`: 400;
 * 4. the caller (401 for a failed credential) and guards: their status;
 * 5. the idempotency claim (`Idempotency`), then the handler acting for the caller with provenance:
 *    a failure `{status, message}` keeps its status, anything else is a 500 without internals;
 * 6. the answer: the output encoded as JSON (200, or 304 with `etag`), or a stream.
 *
 * Deprecation headers go on every answer of a deprecated route. Hand-written routes run steps 3 to
 * 6 in `RouteEndpoint`, projected procedures in `ProcedureEndpoint` (through the procedure runtime).
 */
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { Cause, Scope } from "effect"
import { Effect } from "effect"
import * as CrossSite from "../app/CrossSite.js"
import * as DirectRoute from "../app/DirectRoute.js"
import * as Now from "../kernel/Now.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import * as Answer from "./Answer.js"
import type * as Endpoint from "./Endpoint.js"
import * as Lifecycle from "./Lifecycle.js"
import * as ProcedureEndpoint from "./ProcedureEndpoint.js"
import type * as RestRoute from "./RestRoute.js"
import * as RouteEndpoint from "./RouteEndpoint.js"
import type * as Steps from "./Steps.js"

/**
 * Queries and hand-written routes may be reached by a link from another site with the user's
 * cookies; a hand-written route's store then refuses writes (`RouteEndpoint`).
 */
const navigable: CrossSite.Options = { navigable: true }

/** What every endpoint handler uses. */
export type Env = Steps.Env

/**
 * The answer of a hand-written route's endpoint, eager (`Now`): the cross-site screen, steps 2 to
 * 6 (`RouteEndpoint`), a defect answered 500, and the deprecation headers.
 */
const routeAnswer = (endpoint: Endpoint.Endpoint, route: RestRoute.Any, env: Env, bodyCap: number) => {
  const what = `${endpoint.method} ${endpoint.path}`
  const respond = RouteEndpoint.make(endpoint, route, env, bodyCap)
  const lifecycleHeaders = Lifecycle.headers(endpoint.lifecycle)
  const deprecated = Object.keys(lifecycleHeaders).length > 0
  // A defect outside the handler (a guard that throws, a broken schema) is still a 500 without internals.
  const settle = (cause: Cause.Cause<never>) => Answer.failure(cause, Provenance.newTraceId(), what)
  const withLifecycle = (response: HttpServerResponse.HttpServerResponse) => HttpServerResponse.setHeaders(response, lifecycleHeaders)
  return (
    request: HttpServerRequest.HttpServerRequest,
    params: Readonly<Record<string, string | undefined>>,
    query: Readonly<Record<string, string | ReadonlyArray<string>>>,
    measured: boolean
  ) => {
    let answer: Effect.Effect<HttpServerResponse.HttpServerResponse, never, Scope.Scope | HttpServerRequest.HttpServerRequest>
    try {
      // Without cookies there is nothing to screen (`CrossSite.guardedRequest` would call `respond` at once).
      answer = request.headers["cookie"] === undefined
        ? respond(request, params, query, measured)
        : CrossSite.guardedRequest(env.runtime, request, (screened) => respond(screened, params, query, measured), navigable)
    } catch (defect) {
      answer = Effect.die(defect)
    }
    const settled = Now.catchAllCause(answer, settle)
    return deprecated ? Now.map(settled, withLifecycle) : settled
  }
}

/**
 * The handler of `endpoint`, reading bodies up to `bodyCap`. A hand-written route's handler has
 * an eager twin (`DirectRoute`) the server may call instead of running it through the router.
 */
export const handler = (endpoint: Endpoint.Endpoint, env: Env, bodyCap: number): Steps.Handler => {
  const what = `${endpoint.method} ${endpoint.path}`
  const serve = endpoint.serve
  if (serve._tag === "Route") {
    const respond = routeAnswer(endpoint, serve.route, env, bodyCap)
    const routed: Steps.Handler = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Effect.flatMap(HttpRouter.RouteContext, (route) =>
        Effect.flatMap(HttpServerRequest.ParsedSearchParams, (query) => respond(request, route.params, query, true))))
    // The server dispatches directly only when no tracer is installed: nothing to measure then.
    return DirectRoute.withDirect(routed, (request, params, query) => respond(request, params, query, false))
  }
  const handled = CrossSite.guarded(
    env.runtime,
    serve._tag === "Procedure"
      ? ProcedureEndpoint.make(endpoint, serve.procedure, serve.scopes, env, bodyCap)
      : ProcedureEndpoint.makeLive(endpoint, serve.procedure, serve.scopes, env),
    // A mutation or action never runs on another site's navigation, whatever its method.
    serve.procedure.kind === "query" ? navigable : {}
  ).pipe(
    // A defect outside the handler (a guard that throws, a broken schema) is still a 500 without internals.
    Effect.catchAllCause((cause) => Answer.failure(cause, Provenance.newTraceId(), what))
  )
  const lifecycleHeaders = Lifecycle.headers(endpoint.lifecycle)
  return Object.keys(lifecycleHeaders).length === 0
    ? handled
    : Effect.map(handled, (response) => HttpServerResponse.setHeaders(response, lifecycleHeaders))
}
