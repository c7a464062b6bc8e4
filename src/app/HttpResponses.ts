/**
 * JSON error answers shared by every fw route: `{_tag, message}` with the error's status, and
 * never any internals.
 */
import { HttpServerResponse } from "@effect/platform"
import * as Errors from "./Errors.js"

/** A JSON error body `{_tag, message}` with `status`. */
export const error = (status: number, tag: string, message: string, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson({ _tag: tag, message }, { status, ...(headers ? { headers } : {}) })

/** The HTTP answer of a procedure error (or a declared area error, with its own tag and status). */
export const procedureError = (failure: Errors.WireError): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(
    failure._tag === "InternalError" && "traceId" in failure
      ? { _tag: failure._tag, message: failure.message, traceId: failure.traceId }
      : { _tag: failure._tag, message: failure.message },
    { status: Errors.statusOf(failure) }
  )
