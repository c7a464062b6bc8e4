/**
 * The JSON answer of a REST endpoint (a 200 with its encoded output, or the 304 of a matching
 * `If-None-Match`), as an `HttpServerResponse` that costs almost nothing until something reads it.
 *
 * Every successful GET makes one, and almost every one goes straight to the socket: fw's Node
 * writer (`NodeResponse`) sends `wireHeaders()` and the JSON text in one `end` call. Building the
 * platform's response for it would copy the headers twice and encode the text into a byte array,
 * all garbage a moment later. So the platform's response is made only when anything else reads
 * the answer (`headers`, `body`, `cookies`: a middleware adding a header, the idempotency record,
 * the platform's writer and tracing): it is made by the very calls that made it before
 * (`HttpServerResponse.text` / `empty`), so whoever reads it sees exactly what they saw before.
 * `wireHeaders()` gives the same names, values and order.
 */
import type { Headers, HttpBody } from "@effect/platform"
import { Cookies, HttpServerRespondable, HttpServerResponse } from "@effect/platform"
import { Buffer } from "node:buffer"
import { Effect, Effectable, Inspectable } from "effect"
import * as ETag from "./ETag.js"

/** The answer's own JSON text, or the 304 (no body) a matching `If-None-Match` gets. */
export class JsonResponse extends Effectable.StructuralClass<HttpServerResponse.HttpServerResponse>
  implements HttpServerResponse.HttpServerResponse
{
  readonly [HttpServerResponse.TypeId]: HttpServerResponse.TypeId = HttpServerResponse.TypeId
  readonly statusText: string | undefined = undefined
  private made: HttpServerResponse.HttpServerResponse | undefined = undefined

  constructor(
    readonly status: 200 | 304,
    /** The JSON text (also for the 304: its ETag's source; never sent with it). */
    readonly text: string,
    /** The weak ETag, when the route declares `etag: true`. */
    readonly etag: string | undefined
  ) {
    super()
  }

  /** The platform's response for this answer, made on first use, as `Answer.json` made it before. */
  get platform(): HttpServerResponse.HttpServerResponse {
    if (this.made !== undefined) return this.made
    const etag = this.etag
    if (etag === undefined) return this.made = HttpServerResponse.text(this.text, { contentType: "application/json" })
    const headers = { ...ETag.cacheHeaders, etag }
    return this.made = this.status === 304
      ? HttpServerResponse.empty({ status: 304, headers })
      : HttpServerResponse.text(this.text, { contentType: "application/json", headers })
  }

  get headers(): Headers.Headers {
    return this.platform.headers
  }

  get cookies(): Cookies.Cookies {
    return Cookies.empty
  }

  get body(): HttpBody.HttpBody {
    return this.platform.body
  }

  /**
   * The headers the platform's response would send, in its order: the cache headers and ETag,
   * then (for a 200) the content type and length. The length is `text`'s in UTF-8 bytes, even
   * for a HEAD answer, which sends no body.
   */
  wireHeaders(): Record<string, string> {
    const etag = this.etag
    if (this.status === 304) {
      return { "cache-control": ETag.cacheHeaders["cache-control"]!, vary: ETag.cacheHeaders["vary"]!, etag: etag! }
    }
    const length = Buffer.byteLength(this.text, "utf8")
    // The platform leaves out a zero length (JSON text is never empty: `null` at least).
    if (etag === undefined) {
      return length === 0 ? { "content-type": "application/json" } : { "content-type": "application/json", "content-length": `${length}` }
    }
    const headers: Record<string, string> = {
      "cache-control": ETag.cacheHeaders["cache-control"]!,
      vary: ETag.cacheHeaders["vary"]!,
      etag,
      "content-type": "application/json"
    }
    if (length !== 0) headers["content-length"] = `${length}`
    return headers
  }

  commit(): Effect.Effect<HttpServerResponse.HttpServerResponse> {
    return Effect.succeed(this)
  }

  [HttpServerRespondable.symbol](): Effect.Effect<HttpServerResponse.HttpServerResponse> {
    return Effect.succeed(this)
  }

  [Inspectable.NodeInspectSymbol]() {
    return this.platform.toJSON()
  }

  override toString(): string {
    return this.platform.toString()
  }

  toJSON(): unknown {
    return this.platform.toJSON()
  }
}

/**
 * Whether `response` is a `JsonResponse`: its wire form is then `wireHeaders()` and `text` (a
 * change to an answer is a new response, so reading one never changes what it sends).
 */
export const is = (response: HttpServerResponse.HttpServerResponse): response is JsonResponse => response instanceof JsonResponse

/**
 * A 200 JSON answer of `text`. With `etag`, it carries a weak ETag and the cache headers, and a
 * matching `If-None-Match` gets a 304 with the same headers and no body.
 */
export const make = (text: string, etag: boolean, ifNoneMatch: string | undefined): JsonResponse => {
  if (!etag) return new JsonResponse(200, text, undefined)
  const tag = ETag.of(text)
  return new JsonResponse(ETag.matches(ifNoneMatch, tag) ? 304 : 200, text, tag)
}
