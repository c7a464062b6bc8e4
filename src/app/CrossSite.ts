/**
 * Cross-site request forgery protection for cookie-authenticated requests, on every transport
 * (`POST /rpc`, the rpc WebSocket upgrade, REST routes and projections, authenticated plugin
 * routes). Browsers attach cookies to cross-site requests that the `SameSite` attribute does not
 * stop (a `SameSite=None` provider cookie, a same-site sibling, an old browser), so a cookie alone
 * must not carry the user's authority across sites:
 *
 * - the request must come from this app's origin (its `Origin` names the `Host` it was sent to) or
 *   one of `http.trustedOrigins`; without `Origin`, `Sec-Fetch-Site` must be `same-origin` or
 *   `none` (typed by the user); a request with neither is not a browser's cross-site request. A
 *   top-level GET navigation (a followed link, the redirect after a login) passes where the route
 *   only reads (`navigable`: a query projection, a GET REST or plugin route), as it does
 *   `SameSite=Lax`: its answer reaches the user, not the other site. It never passes for a
 *   mutation or action, whatever its method: what matters is the write, which has happened by the
 *   time anyone reads the answer. A write attempted on a request admitted only as a navigation is
 *   refused by the store the route gets (`viaNavigation`). The WebSocket upgrade is not a
 *   navigation;
 * - a request with a body must declare a JSON type (a cross-site form or `text/plain` body needs
 *   no CORS preflight; `application/json` does).
 *
 * A request that fails either is authenticated without its cookies: a bearer token still works,
 * an anonymous caller stays anonymous, and when its cookies alone would have authenticated it the
 * answer is 403 `CrossSiteRequest` (never a call run as the cookie's user).
 */
import type { Headers } from "@effect/platform"
import { Headers as HeadersModule, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { Effect, Either } from "effect"
import { normalizeOrigin } from "./App.js"
import * as HttpResponses from "./HttpResponses.js"
import type { RuntimeShape } from "./Runtime.js"

/** The origins, besides the app's own, allowed to send cookie-authenticated requests (`scheme://host[:port]`). */
export type TrustedOrigins = ReadonlySet<string>

const isJson = (contentType: string | undefined) => {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase()
  return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"))
}

/** Whether the request carries a body, or says it does. */
const hasBody = (headers: Headers.Headers) => {
  const length = headers["content-length"]
  return (length !== undefined && length !== "0") || headers["transfer-encoding"] !== undefined || headers["content-type"] !== undefined
}

/**
 * A top-level GET navigation (Fetch Metadata: `Sec-Fetch-Mode: navigate`, not into an `<object>`
 * or `<embed>`), the landing page after an IdP's redirect or a followed link.
 */
const isNavigation = (method: string, headers: Headers.Headers) =>
  (method === "GET" || method === "HEAD") && headers["sec-fetch-mode"] === "navigate" &&
  headers["sec-fetch-dest"] !== "object" && headers["sec-fetch-dest"] !== "embed"

/** What the screen knows of the route a request goes to. */
export interface Options {
  /** The transport always reads a body (`POST /rpc`); otherwise a body counts when the request carries one. */
  readonly bodyExpected?: boolean
  /**
   * The route only reads (a query projection, a GET REST or plugin route, an inspect page): a
   * top-level navigation from another site may use its cookies. Never for a mutation, an action
   * or the rpc transports.
   */
  readonly navigable?: boolean
}

/** Why a request may not use its cookies, or undefined when it may. */
export const problem = (method: string, headers: Headers.Headers, trusted: TrustedOrigins, options: Options = {}): string | undefined => {
  const origin = headers["origin"]
  if (options.navigable === true && isNavigation(method, headers)) {
    // A link followed from another site to a page that only reads: what `SameSite=Lax` allows
    // too. Its answer goes to the user's window, not to the other site's script.
  } else if (origin !== undefined) {
    const normalized = normalizeOrigin(origin)
    const host = headers["host"]?.toLowerCase()
    const sameOrigin = normalized !== undefined && host !== undefined && new URL(normalized).host === host
    if (!sameOrigin && (normalized === undefined || !trusted.has(normalized))) {
      return "the request comes from another origin (see the app's http.trustedOrigins)"
    }
  } else {
    const site = headers["sec-fetch-site"]
    if (site !== undefined && site !== "same-origin" && site !== "none") {
      return "the request comes from another site (Sec-Fetch-Site)"
    }
  }
  if ((options.bodyExpected === true || hasBody(headers)) && !isJson(headers["content-type"])) {
    return "a cookie-authenticated request body must be JSON (Content-Type: application/json)"
  }
  return undefined
}

/**
 * Whether a request keeps its cookies only because it is a top-level navigation to a route that
 * reads: from anywhere else it would have lost them. The route's store refuses writes for it, so
 * a GET route that writes cannot be made to write for the user by another site's link.
 */
export const viaNavigation = (method: string, headers: Headers.Headers, trusted: TrustedOrigins): boolean =>
  headers["cookie"] !== undefined && isNavigation(method, headers) && problem(method, headers, trusted) !== undefined

/** Why a request admitted as a navigation may not write (`StoreWriteDenied.reason`). */
export const navigationWrite = {
  reason: "the request is a navigation from another site (a link or redirect), which may only read; write with POST from this app's own pages"
} as const

/**
 * The headers to authenticate the request with: its own when it may use its cookies, else the
 * same without `cookie`. Left: the 403 answer, when its cookies alone would have authenticated it.
 */
export const screen = (
  runtime: RuntimeShape,
  method: string,
  headers: Headers.Headers,
  options: Options = {}
): Effect.Effect<Either.Either<Headers.Headers, HttpServerResponse.HttpServerResponse>> =>
  Effect.gen(function*() {
    if (headers["cookie"] === undefined) return Either.right(headers)
    const reason = problem(method, headers, runtime.app.trustedOrigins, options)
    if (reason === undefined) return Either.right(headers)
    const withoutCookies = HeadersModule.remove(headers, "cookie")
    // Only a request its cookies would authenticate is refused; any other proceeds without them.
    const bare = yield* Effect.either(runtime.resolveSubject(withoutCookies))
    if (Either.isLeft(bare) || bare.right.type !== "anonymous") return Either.right(withoutCookies)
    const full = yield* Effect.either(runtime.resolveSubject(headers))
    if (Either.isLeft(full) || full.right.type === "anonymous") return Either.right(withoutCookies)
    return Either.left(HttpResponses.error(403, "CrossSiteRequest", `refused: ${reason}`))
  })

/**
 * Runs `handler` with the request screened: refused with 403, or with the request's `cookie`
 * header removed when it may not use its cookies.
 */
export const guarded = <E, R>(
  runtime: RuntimeShape,
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
  options: Options = {}
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    // Without cookies there is nothing to screen (every bearer-token or anonymous call): no step spent.
    request.headers["cookie"] === undefined ? handler : Effect.flatMap(
      screen(runtime, request.method, request.headers, options),
      (screened) =>
        Either.isLeft(screened)
          ? Effect.succeed(screened.left)
          : screened.right === request.headers
          ? handler
          : Effect.provideService(handler, HttpServerRequest.HttpServerRequest, request.modify({ headers: screened.right }))
    ))

/**
 * `guarded` for a handler given the request it answers (the request with its cookies removed when
 * it may not use them): without a `cookie` header the handler is called at once, so an answer it
 * gives at once stays one (`DirectRoute`).
 */
export const guardedRequest = <E, R>(
  runtime: RuntimeShape,
  request: HttpServerRequest.HttpServerRequest,
  handler: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
  options: Options = {}
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  request.headers["cookie"] === undefined ? handler(request) : Effect.flatMap(
    screen(runtime, request.method, request.headers, options),
    (screened) => {
      if (Either.isLeft(screened)) return Effect.succeed(screened.left)
      if (screened.right === request.headers) return handler(request)
      const modified = request.modify({ headers: screened.right })
      return Effect.provideService(Effect.suspend(() => handler(modified)), HttpServerRequest.HttpServerRequest, modified)
    }
  )
