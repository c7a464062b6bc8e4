/**
 * A hand-written route's part of the pipeline: decode of `{query, params, body}` through its
 * input (400), the caller (401 for a failed credential), its guards (their status), the handler
 * acting for the caller (a failure `{status, message}` keeps its status, anything else is a 500
 * without internals), and the answer: the output encoded as JSON (200, or 304 with `etag`), or a
 * streamed `sse(...)` / `bytes(...)` answer (headers only for HEAD).
 */
import { HttpLayerRouter, HttpServerRequest } from "@effect/platform"
import type { HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Either, Option, Stream } from "effect"
import * as Errors from "../app/Errors.js"
import * as Guard from "../app/Guard.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as Provenance from "../kernel/Provenance.js"
import * as Telemetry from "../kernel/Telemetry.js"
import * as Answer from "./Answer.js"
import * as Bytes from "./Bytes.js"
import * as Codec from "./Codec.js"
import type * as Endpoint from "./Endpoint.js"
import type * as Idempotency from "./Idempotency.js"
import * as QueryInput from "./QueryInput.js"
import * as RateLimit from "./RateLimit.js"
import * as RequestBody from "./RequestBody.js"
import * as ResponseControl from "./ResponseControl.js"
import * as RestRoute from "./RestRoute.js"
import * as Sse from "./Sse.js"
import * as Steps from "./Steps.js"

/** An undeclared stream on a mutating route: a 500 (which releases an idempotency claim). */
const undeclaredStream = (what: string, traceId: string) =>
  Effect.as(
    Effect.annotateLogs(Effect.logError(`${what} returned a stream without declaring "streaming: true"`), { traceId }),
    Answer.internalError(traceId)
  )

/**
 * Frames of a hand-written SSE answer: before each one the caller is resolved again and the
 * route's guards re-run; a refusal is sent as one `error` event and ends the stream. A failing
 * source ends it with an `error` event too (the status line is long gone).
 */
const guardedFrames = (
  frames: Stream.Stream<string, unknown>,
  guards: ReadonlyArray<Guard.Guard>,
  env: Steps.Env,
  headers: RestRoute.Context["headers"]
): Stream.Stream<string> => {
  const recheck = Effect.gen(function*() {
    const subject = yield* env.runtime.resolveSubject(headers)
    yield* env.runtime.withHandlerContext(Guard.runGuards(guards, { subject, headers, store: env.store }))
  })
  const checked = guards.length === 0 ? frames : Stream.mapEffect(frames, (frame) => Effect.as(recheck, frame))
  return checked.pipe(
    Stream.catchAllCause((cause) => {
      const error = Option.getOrUndefined(Cause.failureOption(cause))
      const data = error instanceof Guard.GuardRefused
        ? { _tag: error._tag, status: error.status, message: error.message }
        : error instanceof Guard.FlagDisabled
        ? { _tag: error._tag, status: 403, message: error.message }
        : error instanceof Errors.Unauthenticated
        ? { _tag: error._tag, message: error.message }
        : { _tag: "StreamFailed", message: "the event source failed" }
      const logged = data._tag === "StreamFailed" ? Effect.logError("SSE source failed", cause) : Effect.void
      return Stream.fromEffect(Effect.as(logged, Sse.sseFrame("error", data)))
    })
  )
}

/** The handler of a hand-written route's endpoint, reading bodies up to `bodyCap`. */
export const make = (endpoint: Endpoint.Endpoint, route: RestRoute.Any, env: Steps.Env, bodyCap: number): Steps.Handler => {
  const what = `${endpoint.method} ${endpoint.path}`
  const prologue = Steps.prologue(endpoint, bodyCap)
  const readQuery = QueryInput.reader(QueryInput.fieldOf(route.input.ast, "query"))
  const readParams = QueryInput.reader(QueryInput.fieldOf(route.input.ast, "params"))
  const decode = Codec.decoder(route.input)
  const encode = Answer.encoder(route.output, what)
  const provenanceName = `rest ${what}`
  const mustDeclareStreams = RestRoute.mutatingMethods.has(route.method) && !route.streaming
  const limiter = env.rateLimits === undefined ? undefined : RateLimit.limiter(endpoint, env.rateLimits)
  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    let bytes: Uint8Array | undefined
    if (prologue !== undefined) {
      const before = yield* prologue(request)
      if (Either.isLeft(before)) return before.left
      bytes = before.right
    }
    const body = RequestBody.parse(bytes, request.headers["content-type"])
    if (Either.isLeft(body)) return body.left
    const raw: Record<string, unknown> = {
      query: readQuery(yield* HttpServerRequest.ParsedSearchParams),
      params: readParams((yield* HttpLayerRouter.RouteContext).params)
    }
    if (body.right !== undefined) raw.body = body.right
    const decoded = decode(raw)
    const input = Either.isEither(decoded) ? decoded : yield* decoded
    if (Either.isLeft(input)) return Answer.inputInvalid(input.left)
    const resolved = yield* Effect.either(env.runtime.resolveSubject(request.headers))
    if (Either.isLeft(resolved)) return HttpResponses.procedureError(resolved.left)
    const subject = resolved.right
    let limited: string | undefined
    if (limiter !== undefined) {
      const checked = limiter.check(subject, request)
      const verdict = RateLimit.isPending(checked) ? yield* checked : checked
      if (RateLimit.isRefusal(verdict)) return verdict
      limited = verdict
    }
    const traceId = Provenance.traceIdOf(request.headers)
    const response = ResponseControl.make()
    const ctx: RestRoute.Context = { subject, headers: request.headers, store: env.store, traceId, response: response.control }
    if (route.guards.length > 0) {
      const checked = Steps.checkGuards(route.guards, ctx)
      const refusal = Effect.isEffect(checked) ? yield* Effect.either(env.runtime.withHandlerContext(checked)) : Either.right(checked)
      const refused = Either.isLeft(refusal)
        ? HttpResponses.procedureError(refusal.left)
        : refusal.right !== undefined
        ? HttpResponses.error(refusal.right.status, "GuardRefused", refusal.right.message)
        : undefined
      if (refused !== undefined) return limited === undefined ? refused : limiter!.withHeaders(refused, limited)
    }
    const toResponse = (result: unknown): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
      if (Sse.isSse(result)) {
        if (mustDeclareStreams) return undeclaredStream(what, traceId)
        if (request.method === "HEAD") return Effect.succeed(Sse.head())
        return Effect.succeed(Sse.response(guardedFrames(result.frames, route.guards, env, request.headers)))
      }
      if (Bytes.isBytes(result)) {
        if (mustDeclareStreams) return undeclaredStream(what, traceId)
        return Effect.succeed(request.method === "HEAD" ? Bytes.head(result) : Bytes.response(result))
      }
      return Effect.map(encode(result, traceId), (json) =>
        typeof json === "string" ? Answer.json(json, route.etag, request.headers["if-none-match"]) : json)
    }
    const answer = () =>
      Effect.matchCauseEffect(
        Steps.actingFor(subject, { traceId, subjectId: subject.id, procedure: provenanceName }, () => env.runtime.withHandlerContext(route.handler(input.right, ctx))),
        {
          onFailure: (cause) => Answer.failure(cause, traceId, what),
          onSuccess: (result) => Effect.map(toResponse(result), response.apply)
        }
      )
    const claimed = Steps.underKey(env, endpoint, request, subject, bytes, () =>
      Effect.map(answer(), (response): Idempotency.Outcome => ({ response, handlerRan: true })))
    const answered = yield* Telemetry.route(what, traceId)(claimed ?? answer())
    // Added outside the idempotency claim: a replay carries the current count, not the recorded one.
    return limited === undefined ? answered : limiter!.withHeaders(answered, limited)
  })
}
