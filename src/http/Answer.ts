/**
 * Turning what a handler produced into the HTTP answer: the encoded output as JSON (with a weak
 * ETag and 304 where asked), a failure carrying `{status, message}` as that status, a typed
 * procedure error as its status, and anything else as a 500 that shows only the trace id (the
 * cause is logged with it).
 */
import { HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Either, Option, ParseResult, Schema } from "effect"
import * as Errors from "../app/Errors.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as Codec from "./Codec.js"
import * as JsonResponse from "./JsonResponse.js"

const isProcedureError = Schema.is(Errors.ProcedureError)

const isStatusError = (error: unknown): error is { readonly status: number; readonly message: string } =>
  typeof error === "object" && error !== null && "status" in error && "message" in error &&
  typeof error.status === "number" && Number.isInteger(error.status) && typeof error.message === "string" &&
  error.status >= 400 && error.status < 600

/** The 500 answer: a trace id to quote, nothing else. */
export const internalError = (traceId: string) =>
  HttpServerResponse.unsafeJson({ _tag: "InternalError", message: "internal error", traceId }, { status: 500 })

/** The answer to a failed handler. Interruption is passed on (the client is gone). */
export const failure = (
  cause: Cause.Cause<unknown>,
  traceId: string,
  what: string
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
  const error = Cause.failureOption(cause)
  if (Option.isSome(error)) {
    if (isProcedureError(error.value)) return Effect.map(Errors.forClient(error.value, traceId), HttpResponses.procedureError)
    if (isStatusError(error.value)) {
      return Effect.succeed(HttpResponses.error(error.value.status, "ProcedureFailure", error.value.message))
    }
  }
  return Effect.as(
    Effect.annotateLogs(Effect.logError(`${what} failed unexpectedly`, cause), { traceId }),
    internalError(traceId)
  )
}

/** The 400 answer to an input that does not decode. */
export const inputInvalid = (error: ParseResult.ParseError) =>
  HttpResponses.error(400, "InputInvalid", Errors.describeParseError(error))

/**
 * An encoder of handler results through `schema` to JSON text (compiled once per route), giving the
 * text at once when the schema encodes synchronously. A result that does not encode is a bug: it is
 * logged with the request's trace id (read from `trace` only then) and answered 500.
 */
export const encoderNow = <A, I>(schema: Schema.Schema<A, I>, what: string) => {
  const encodeSchema = Codec.encoder(schema)
  const invalid = (error: ParseResult.ParseError, traceId: string) =>
    Effect.as(
      Effect.annotateLogs(
        Effect.logError(`${what}: the handler's result does not match the output schema`, error.message),
        { traceId }
      ),
      internalError(traceId)
    )
  const settle = (
    result: Either.Either<unknown, ParseResult.ParseError>,
    trace: { readonly traceId: string }
  ): string | Effect.Effect<HttpServerResponse.HttpServerResponse> =>
    Either.isRight(result) ? JSON.stringify(result.right) ?? "null" : invalid(result.left, trace.traceId)
  return (
    value: unknown,
    trace: { readonly traceId: string }
  ): string | Effect.Effect<string | HttpServerResponse.HttpServerResponse> => {
    const encoded = encodeSchema(value)
    return Either.isEither(encoded)
      ? settle(encoded, trace)
      : Effect.flatMap(encoded, (result): Effect.Effect<string | HttpServerResponse.HttpServerResponse> => {
        const settled = settle(result, trace)
        return typeof settled === "string" ? Effect.succeed(settled) : settled
      })
  }
}

/**
 * An encoder of handler results through `schema` to JSON text (compiled once per route), as an
 * effect (`encoderNow`, for callers with the trace id at hand).
 */
export const encoder = <A, I>(schema: Schema.Schema<A, I>, what: string) => {
  const encode = encoderNow(schema, what)
  return (value: unknown, traceId: string): Effect.Effect<string | HttpServerResponse.HttpServerResponse> => {
    const encoded = encode(value, { traceId })
    return typeof encoded === "string" ? Effect.succeed(encoded) : encoded
  }
}

/**
 * A 200 JSON answer. With `etag`, it carries a weak ETag and the cache headers, and a matching
 * `If-None-Match` gets a 304 with the same headers and no body (`JsonResponse`).
 */
export const json = (body: string, etag: boolean, ifNoneMatch: string | undefined): HttpServerResponse.HttpServerResponse =>
  JsonResponse.make(body, etag, ifNoneMatch)
