/**
 * A hand-written route's part of the pipeline: decode of `{query, params, body}` through its
 * input (400), the caller (401 for a failed credential), its guards (their status), the handler
 * acting for the caller (a failure `{status, message}` keeps its status, anything else is a 500
 * without internals; a request admitted only as another site's navigation gets a read-only
 * store), and the answer: the output encoded as JSON (200, or 304 with `etag`), or a
 * streamed `sse(...)` / `bytes(...)` answer (headers only for HEAD).
 */
import type { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { ParseResult, Scope } from "effect"
import { Cause, Effect, Either, Exit, Option, Stream } from "effect"
import * as CrossSite from "../app/CrossSite.js"
import * as Errors from "../app/Errors.js"
import * as Guard from "../app/Guard.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as PluginServices from "../app/PluginServices.js"
import * as Now from "../kernel/Now.js"
import type * as Subject from "../kernel/Subject.js"
import * as Telemetry from "../kernel/Telemetry.js"
import * as Answer from "./Answer.js"
import * as Bytes from "./Bytes.js"
import * as Codec from "./Codec.js"
import type * as Endpoint from "./Endpoint.js"
import type * as Idempotency from "./Idempotency.js"
import * as QueryInput from "./QueryInput.js"
import * as RateLimit from "./RateLimit.js"
import * as RequestBody from "./RequestBody.js"
import * as RestRoute from "./RestRoute.js"
import { RouteContext } from "./RouteContext.js"
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

/** One request to a route, once its input is decoded and its caller resolved. */
interface Call {
  readonly request: HttpServerRequest.HttpServerRequest
  readonly input: unknown
  readonly subject: Subject.Subject
  readonly bytes: Uint8Array | undefined
  /** The `RateLimit` header value the request was admitted with, if the route is limited. */
  readonly limited: string | undefined
  readonly measured: boolean
  /** The handler's context; also the request's trace id, made when first read. */
  readonly ctx: RouteContext
}

/** How a route answers one request, given its path params and query (see `make`). */
export type Respond = (
  request: HttpServerRequest.HttpServerRequest,
  params: Readonly<Record<string, string | undefined>>,
  query: Readonly<Record<string, string | ReadonlyArray<string>>>,
  measured: boolean
) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, Scope.Scope>

/**
 * A hand-written route's endpoint, reading bodies up to `bodyCap`: its answer to a request, eager
 * (`Now`) so that a route whose steps all answer at once yields its response without a fiber.
 * `measured`: recorded by `Telemetry.route` (spans and metrics when a tracer is installed); the
 * server's direct dispatch passes false, as it runs only when no tracer is installed.
 */
export const make = (endpoint: Endpoint.Endpoint, route: RestRoute.Any, env: Steps.Env, bodyCap: number): Respond => {
  const what = `${endpoint.method} ${endpoint.path}`
  const prologue = Steps.prologue(endpoint, bodyCap)
  const readQuery = QueryInput.reader(QueryInput.fieldOf(route.input.ast, "query"))
  const readParams = QueryInput.reader(QueryInput.fieldOf(route.input.ast, "params"))
  const decode = Codec.decoder(route.input)
  const encode = Answer.encoderNow(route.output, what)
  const provenanceName = `rest ${what}`
  const mustDeclareStreams = RestRoute.mutatingMethods.has(route.method) && !route.streaming
  const limiter = env.rateLimits === undefined ? undefined : RateLimit.limiter(endpoint, env.rateLimits)

  const claims = endpoint.claimable && env.idempotency !== undefined
  const readOnly = PluginServices.readOnlyStore(env.store, CrossSite.navigationWrite)

  // The steps below are functions of the route taking the request's `Call`, not closures made per
  // request, and a step that answers at once hands its value straight to the next (no `Exit`, no
  // continuation): a request allocates its call and context, and little else it can avoid. A step
  // that must wait continues as an ordinary effect.

  /** The answer to the handler's result, with the headers and cookies the handler set. */
  const toResponse = (call: Call, result: unknown): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    const request = call.request
    let response: Effect.Effect<HttpServerResponse.HttpServerResponse>
    if (Sse.isSse(result)) {
      response = mustDeclareStreams
        ? undeclaredStream(what, call.ctx.traceId)
        : Effect.succeed(request.method === "HEAD" ? Sse.head() : Sse.response(guardedFrames(result.frames, route.guards, env, request.headers)))
    } else if (Bytes.isBytes(result)) {
      response = mustDeclareStreams
        ? undeclaredStream(what, call.ctx.traceId)
        : Effect.succeed(request.method === "HEAD" ? Bytes.head(result) : Bytes.response(result))
    } else {
      const json = encode(result, call.ctx)
      if (typeof json === "string") return Effect.succeed(call.ctx.apply(Answer.json(json, route.etag, request.headers["if-none-match"])))
      response = Now.map(json, (json) => typeof json === "string" ? Answer.json(json, route.etag, request.headers["if-none-match"]) : json)
    }
    return Now.map(response, (answered) => call.ctx.apply(answered))
  }
  /** The handler, acting for the caller, and its answer (a failure answered by `Answer.failure`). */
  const answer = (call: Call): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    // The handler is called now: one that throws fails as a defect, as it would inside the fiber.
    let effect: Effect.Effect<unknown, unknown>
    try {
      effect = env.runtime.withHandlerContext(route.handler(call.input, call.ctx))
    } catch (defect) {
      effect = Effect.die(defect)
    }
    const exit = Now.exitOf(effect)
    // An answer given at once reads no fiber ref: it needs neither the caller nor the provenance set.
    if (exit !== undefined) return exit._tag === "Success" ? toResponse(call, exit.value) : Answer.failure(exit.cause, call.ctx.traceId, what)
    const provenance = { traceId: call.ctx.traceId, subjectId: call.subject.id, procedure: provenanceName }
    return Effect.matchCauseEffect(Steps.actingFor(call.subject, provenance, effect), {
      onFailure: (cause) => Answer.failure(cause, call.ctx.traceId, what),
      onSuccess: (result) => toResponse(call, result)
    })
  }
  const handled = (call: Call) => {
    const claimed = claims
      ? Steps.underKey(env, endpoint, call.request, call.subject, call.bytes, () =>
        Effect.map(answer(call), (response): Idempotency.Outcome => ({ response, handlerRan: true })))
      : undefined
    const answered = claimed ?? answer(call)
    const recorded = call.measured ? Telemetry.route(what, call.ctx.traceId)(answered) : answered
    // Added outside the idempotency claim: a replay carries the current count, not the recorded one.
    const limited = call.limited
    return limited === undefined ? recorded : Now.map(recorded, (answered) => limiter!.withHeaders(answered, limited))
  }

  /** The answer to a refusal (a guard's, or a failed effectful guard's), with the rate-limit headers. */
  const refused = (refusal: Either.Either<Guard.Refusal | undefined, Guard.FlagDisabled>, call: Call) => {
    const answer = Either.isLeft(refusal)
      ? HttpResponses.procedureError(refusal.left)
      : refusal.right !== undefined
      ? HttpResponses.error(refusal.right.status, "GuardRefused", refusal.right.message)
      : undefined
    if (answer === undefined) return handled(call)
    return Effect.succeed(call.limited === undefined ? answer : limiter!.withHeaders(answer, call.limited))
  }

  /** Guards, the idempotency claim and the handler, for a decoded input and a resolved caller. */
  const authorised = (
    request: HttpServerRequest.HttpServerRequest,
    input: unknown,
    subject: Subject.Subject,
    bytes: Uint8Array | undefined,
    limited: string | undefined,
    measured: boolean
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, never, Scope.Scope> => {
    // A link from another site keeps the user's cookies on a GET route (`CrossSite`); the route
    // may answer it, but not write for the user.
    const store = CrossSite.viaNavigation(request.method, request.headers, env.runtime.app.trustedOrigins) ? readOnly : env.store
    const ctx = new RouteContext(subject, request.headers, store)
    const call: Call = { request, input, subject, bytes, limited, measured, ctx }
    if (route.guards.length === 0) return handled(call)
    const checked = Steps.checkGuards(route.guards, ctx)
    if (!Effect.isEffect(checked)) return checked === undefined ? handled(call) : refused(Either.right(checked), call)
    return Now.flatMap(Now.either(env.runtime.withHandlerContext(checked)), (refusal) => refused(refusal, call))
  }

  /** The rate limit, for a decoded input and a resolved caller. */
  const admitted = (
    request: HttpServerRequest.HttpServerRequest,
    input: unknown,
    subject: Subject.Subject,
    bytes: Uint8Array | undefined,
    measured: boolean
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, never, Scope.Scope> => {
    if (limiter === undefined) return authorised(request, input, subject, bytes, undefined, measured)
    const checked = limiter.check(subject, request)
    return Now.flatMap(RateLimit.isPending(checked) ? checked : Effect.succeed(checked), (verdict) =>
      RateLimit.isRefusal(verdict)
        ? Effect.succeed(verdict)
        : authorised(request, input, subject, bytes, verdict, measured))
  }

  /** The caller (401 for a failed credential), for a decoded input. */
  const withInput = (
    request: HttpServerRequest.HttpServerRequest,
    input: Either.Either<unknown, ParseResult.ParseError>,
    bytes: Uint8Array | undefined,
    measured: boolean
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, never, Scope.Scope> => {
    if (Either.isLeft(input)) return Effect.succeed(Answer.inputInvalid(input.left))
    const resolved = env.runtime.resolveSubject(request.headers)
    const exit = Now.exitOf(resolved)
    if (exit === undefined) {
      return Effect.flatMap(Effect.either(resolved), (caller) =>
        Either.isLeft(caller)
          ? Effect.succeed(HttpResponses.procedureError(caller.left))
          : admitted(request, input.right, caller.right, bytes, measured))
    }
    if (exit._tag === "Success") return admitted(request, input.right, exit.value, bytes, measured)
    // A defect resolving the caller is the pipeline's to answer (a 500).
    return exit.cause._tag === "Fail" ? Effect.succeed(HttpResponses.procedureError(exit.cause.error)) : Exit.failCause(exit.cause as Cause.Cause<never>)
  }

  /** Decode, the caller and the rate limit, after the body (if any) was read. */
  const decoded = (
    request: HttpServerRequest.HttpServerRequest,
    params: Readonly<Record<string, string | undefined>>,
    query: Readonly<Record<string, string | ReadonlyArray<string>>>,
    bytes: Uint8Array | undefined,
    measured: boolean
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, never, Scope.Scope> => {
    const body = bytes === undefined ? undefined : RequestBody.parse(bytes, request.headers["content-type"])
    if (body !== undefined && Either.isLeft(body)) return Effect.succeed(body.left)
    const raw: Record<string, unknown> = { query: readQuery(query), params: readParams(params) }
    if (body !== undefined && body.right !== undefined) raw.body = body.right
    const outcome = decode(raw)
    return Either.isEither(outcome)
      ? withInput(request, outcome, bytes, measured)
      : Effect.flatMap(outcome, (input) => withInput(request, input, bytes, measured))
  }

  return (request, params, query, measured) =>
    prologue === undefined
      ? decoded(request, params, query, undefined, measured)
      : Effect.flatMap(prologue(request), (before) =>
        Either.isLeft(before) ? Effect.succeed(before.left) : decoded(request, params, query, before.right, measured))
}
