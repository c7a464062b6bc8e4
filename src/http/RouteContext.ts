/**
 * The `ctx` a hand-written route's guards and handler get for one request (`RestRoute.Context`):
 * the caller, the request headers and the store as fields; the trace id and the response control
 * made on first read.
 *
 * Most requests read neither: a trace id is a random UUID (made only when a log line, an error
 * body, a write's provenance or the handler asks for it), and the response control's header map
 * and setters are made only when a handler sets something. The trace id, once read, stays the
 * same for the request.
 */
import type { Headers, HttpServerResponse } from "@effect/platform"
import * as Provenance from "../kernel/changes/Provenance.js"
import type * as Subject from "../kernel/Subject.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as ResponseControl from "./ResponseControl.js"
import type * as RestRoute from "./RestRoute.js"

/** The context of one request to a hand-written route. */
export class RouteContext implements RestRoute.Context {
  #traceId: string | undefined = undefined
  #collector: ResponseControl.Collector | undefined = undefined

  constructor(
    readonly subject: Subject.Subject,
    readonly headers: Headers.Headers,
    readonly store: StoreShape
  ) {}

  /** The request's trace id: a well-formed `x-fw-trace-id` it carries, or a fresh one (`Provenance.traceIdOf`). */
  get traceId(): string {
    return this.#traceId ??= Provenance.traceIdOf(this.headers)
  }

  get response(): ResponseControl.ResponseControl {
    return (this.#collector ??= ResponseControl.make()).control
  }

  /** `response`'s headers and cookies applied to the handler's answer (the answer itself when nothing was set). */
  apply(response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse {
    return this.#collector === undefined ? response : this.#collector.apply(response)
  }
}
