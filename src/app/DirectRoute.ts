/**
 * Direct dispatch: a route's handler may come with an eager twin that the server calls with the
 * request, its path params and its query instead of running the handler through the router.
 *
 * The twin must answer exactly as the handler does. It is built from the same code, written with
 * the eager combinators of `Now`: when every step answers at once the twin returns the response
 * as an `Exit` and the server writes it without starting a fiber; otherwise the effect it returns
 * runs in the request's fiber with the context the router would give the handler (request, path
 * params, query, scope).
 *
 * ```ts
 * const handler = DirectRoute.withDirect(
 *   Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => answer(request)),
 *   (request) => answer(request))
 * yield* router.add("GET", "/items/:id", handler)
 * ```
 *
 * Global router middleware is skipped by direct dispatch unless it registered its own eager form
 * (`withEdge`): the server then dispatches directly only when every global middleware has one.
 */
import type { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { Effect, Scope } from "effect"

/** What a route handler may read from its context. */
export type RouteServices =
  | HttpServerRequest.HttpServerRequest
  | HttpServerRequest.ParsedSearchParams
  | HttpRouter.RouteContext
  | Scope.Scope

/** A route answer, eager where it can be. */
export type Answer = Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, RouteServices>

/** The eager twin of a route handler. */
export type Direct = (
  request: HttpServerRequest.HttpServerRequest,
  params: Readonly<Record<string, string | undefined>>,
  searchParams: Readonly<Record<string, string | ReadonlyArray<string>>>
) => Answer

/** The eager form of a global router middleware, around a found route's answer. */
export type Edge = (request: HttpServerRequest.HttpServerRequest, answer: Answer) => Answer

const directs = new WeakMap<object, Direct>()
const edges = new WeakMap<object, Edge>()

/** Registers `direct` as the eager twin of `handler`, which is returned to be mounted as usual. */
export const withDirect = <H extends object>(handler: H, direct: Direct): H => {
  directs.set(handler, direct)
  return handler
}

/** The eager twin of a mounted handler, if it has one. */
export const directOf = (handler: object): Direct | undefined => directs.get(handler)

/** Registers `edge` as the eager form of the global middleware `middleware`, which is returned. */
export const withEdge = <M extends object>(middleware: M, edge: Edge): M => {
  edges.set(middleware, edge)
  return middleware
}

/** The eager form of a global middleware, if it has one. */
export const edgeOf = (middleware: object): Edge | undefined => edges.get(middleware)
