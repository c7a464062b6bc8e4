/**
 * The answer for a path no route serves: 404 with the same JSON `{_tag, message}` body as every
 * other framework error, where the router alone would answer an empty 404 (issue 21).
 */
import type { HttpServerResponse } from "@effect/platform"
import { HttpServerError } from "@effect/platform"
import { Cause, Effect, Option } from "effect"
import * as HttpResponses from "../app/HttpResponses.js"
import * as Now from "../kernel/Now.js"

/** 404 `RouteNotFound` as JSON. */
export const response = (method: string, url: string) =>
  HttpResponses.error(404, "RouteNotFound", `no route for ${method} ${url.split("?")[0]}`)

/**
 * Turns the router's `RouteNotFound` into the JSON 404. Used in a global router middleware, which
 * wraps the route lookup itself (a per-route middleware never sees an unmatched path).
 */
export const middleware = <E, R>(
  httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, Exclude<E, HttpServerError.RouteNotFound>, R> =>
  Effect.catchIf(
    httpEffect,
    (error): error is E & HttpServerError.RouteNotFound => error instanceof HttpServerError.RouteNotFound,
    (error) => Effect.succeed(response(error.request.method, error.request.url))
  ) as Effect.Effect<HttpServerResponse.HttpServerResponse, Exclude<E, HttpServerError.RouteNotFound>, R>

/** `middleware`, eager: an answer given at once stays one (`DirectRoute.Edge`). */
export const edge = <E, R>(
  httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, Exclude<E, HttpServerError.RouteNotFound>, R> =>
  // An answer that waits for a call on its own fiber (`Now.later`) stays marked as such.
  Now.exitOf(httpEffect) === undefined && Now.laterOf(httpEffect) === undefined ? middleware(httpEffect) : Now.catchAllCause(httpEffect, (cause) => {
    const error = Cause.failureOption(cause)
    return Option.isSome(error) && error.value instanceof HttpServerError.RouteNotFound
      ? Effect.succeed(response(error.value.request.method, error.value.request.url))
      : Effect.failCause(cause as Cause.Cause<Exclude<E, HttpServerError.RouteNotFound>>)
  })
