/**
 * Response headers and cookies set by a REST handler (`ctx.response`). They are applied to the
 * handler's successful answer — a 200, its 304, a HEAD answer, a stream — and never to a refusal
 * the framework answers itself. Idempotency never replays a `Set-Cookie`.
 *
 * ```ts
 * handler: (input, ctx) => Effect.gen(function*() {
 *   yield* ctx.response.setHeader("Cache-Control", "private, max-age=60")
 *   yield* ctx.response.setCookie("theme", "dark", { path: "/", httpOnly: true, sameSite: "lax" })
 *   return result
 * })
 * ```
 */
import { Cookies, HttpServerResponse } from "@effect/platform"
import { Effect, Either } from "effect"
import { ResponseHeaderInvalid } from "./Errors.js"

/** What a handler may set on its response. */
export interface ResponseControl {
  /** Sets a header, replacing an earlier one of the same name. `Set-Cookie` goes through `setCookie`. */
  readonly setHeader: (name: string, value: string) => Effect.Effect<void, ResponseHeaderInvalid>
  /** Adds a `Set-Cookie` (a later cookie of the same name replaces an earlier one). */
  readonly setCookie: (
    name: string,
    value: string,
    options?: Cookies.Cookie["options"]
  ) => Effect.Effect<void, ResponseHeaderInvalid>
}

/** A response control for one request, and what applies its settings to the answer. */
export interface Collector {
  readonly control: ResponseControl
  readonly apply: (response: HttpServerResponse.HttpServerResponse) => HttpServerResponse.HttpServerResponse
}

const token = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const unsafeValue = /[\r\n\0]/
/** Headers the framework computes from the body or the connection; a handler setting them would corrupt the answer. */
const owned: ReadonlySet<string> = new Set(["content-length", "transfer-encoding", "connection", "set-cookie", "content-encoding"])

/** A collector for one request. */
export const make = (): Collector => {
  const headers = new Map<string, string>()
  let cookies = Cookies.empty
  const refuse = (name: string, reason: string) => Effect.fail(new ResponseHeaderInvalid({ header: name, reason }))
  return {
    control: {
      setHeader: (name, value) => {
        const lower = name.toLowerCase()
        if (!token.test(name)) return refuse(name, "not a valid header name")
        if (owned.has(lower)) return refuse(name, lower === "set-cookie" ? "use setCookie" : "the framework sets it")
        if (unsafeValue.test(value)) return refuse(name, "a header value may not contain CR, LF or NUL")
        return Effect.sync(() => void headers.set(lower, value))
      },
      setCookie: (name, value, options) =>
        Either.match(Cookies.makeCookie(name, value, options), {
          onLeft: (error) => refuse(name, `invalid cookie: ${error.reason}`),
          onRight: (cookie) => Effect.sync(() => void (cookies = Cookies.setCookie(cookies, cookie)))
        })
    },
    apply: (response) => {
      if (headers.size === 0 && Cookies.isEmpty(cookies)) return response
      const withHeaders = headers.size === 0 ? response : HttpServerResponse.setHeaders(response, Object.fromEntries(headers))
      return Cookies.isEmpty(cookies) ? withHeaders : HttpServerResponse.mergeCookies(withHeaders, cookies)
    }
  }
}

/**
 * A collector made on first use of its `control`: every REST request has one, and most handlers
 * set nothing, so most requests never make the headers map and setters.
 */
export class Lazy {
  private made: Collector | undefined

  get control(): ResponseControl {
    return (this.made ??= make()).control
  }

  apply(response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse {
    return this.made === undefined ? response : this.made.apply(response)
  }
}
