/**
 * A projected procedure's part of the pipeline. The input is read from the query string (GET) or
 * the JSON body, plus any `:params` of the path; the call goes through the procedure runtime, so
 * the caller, decode, guards, row filter and tenant scoping are exactly the socket's. A live query
 * (`stream: 'sse'`) answers a `text/event-stream` (see `LiveQuery`).
 */
import { Headers, HttpLayerRouter, HttpServerRequest } from "@effect/platform"
import type { HttpServerResponse } from "@effect/platform"
import { Effect, Either } from "effect"
import * as HttpResponses from "../app/HttpResponses.js"
import type * as Procedure from "../app/Procedure.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import * as Answer from "./Answer.js"
import type * as Endpoint from "./Endpoint.js"
import type * as Idempotency from "./Idempotency.js"
import * as LiveQuery from "./LiveQuery.js"
import * as QueryInput from "./QueryInput.js"
import * as RateLimit from "./RateLimit.js"
import * as RequestBody from "./RequestBody.js"
import * as Sse from "./Sse.js"
import * as Steps from "./Steps.js"

/** Failures raised before a projected handler runs: they do not consume an idempotency key. */
const beforeHandler: ReadonlySet<string> = new Set(["InputInvalid", "GuardRefused", "FlagDisabled", "Unauthenticated", "ProcedureNotFound"])

/** The handler of a projected query, mutation or action, reading bodies up to `bodyCap`. */
export const make = (
  endpoint: Endpoint.Endpoint,
  procedure: Procedure.Any,
  scopes: ReadonlyArray<string>,
  env: Steps.Env,
  bodyCap: number
): Steps.Handler => {
  const what = `${endpoint.method} ${endpoint.path}`
  const prologue = Steps.prologue(endpoint, bodyCap)
  const readInput = QueryInput.reader(procedure.input.ast)
  const encode = Answer.encoder(procedure.output, what)
  const fromQuery = endpoint.method === "GET" || endpoint.method === "HEAD"
  const limiter = env.rateLimits === undefined ? undefined : RateLimit.limiter(endpoint, env.rateLimits)
  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    let bytes: Uint8Array | undefined
    if (prologue !== undefined) {
      const before = yield* prologue(request)
      if (Either.isLeft(before)) return before.left
      bytes = before.right
    }
    let input: unknown
    if (fromQuery) {
      input = readInput(yield* HttpServerRequest.ParsedSearchParams)
    } else {
      const body = RequestBody.parse(bytes, request.headers["content-type"])
      if (Either.isLeft(body)) return body.left
      input = body.right ?? {}
    }
    const params = (yield* HttpLayerRouter.RouteContext).params
    if (Object.keys(params).length > 0 && typeof input === "object" && input !== null) {
      input = { ...input, ...readInput(params) }
    }
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
    // Every answer from here on carries the limit's headers (added outside the idempotency claim:
    // a replay shows the current count, not the recorded one).
    const finish = (response: HttpServerResponse.HttpServerResponse) =>
      limited === undefined ? response : limiter!.withHeaders(response, limited)
    const refusal = Steps.scopeRefusal(subject, scopes)
    if (refusal !== undefined) return finish(HttpResponses.procedureError(refusal))
    const traceId = Provenance.traceIdOf(request.headers)
    // The runtime and the encoder agree on the request's trace id.
    const headers = Headers.set(request.headers, Provenance.traceHeader, traceId)
    const invocation = { input, headers, subject }
    const run = () =>
      Effect.matchEffect(env.runtime.call(procedure, invocation), {
        onFailure: (error) =>
          Effect.succeed<Idempotency.Outcome>({
            response: HttpResponses.procedureError(error),
            handlerRan: !beforeHandler.has(error._tag)
          }),
        onSuccess: (output) =>
          Effect.map(encode(output, traceId), (json): Idempotency.Outcome => ({
            response: typeof json === "string" ? Answer.json(json, false, undefined) : json,
            handlerRan: true
          }))
      })
    const claimed = Steps.underKey(env, endpoint, request, subject, bytes, run)
    if (claimed === undefined) return finish((yield* run()).response)
    // Decode and guards hold before the key is looked up: a caller the procedure refuses gets its
    // refusal, never another caller's stored answer (and refusals do not consume the key).
    const authorized = yield* Effect.either(env.runtime.authorize(procedure, invocation))
    return finish(Either.isLeft(authorized) ? HttpResponses.procedureError(authorized.left) : yield* claimed)
  })
}

/** The handler of a projected live query: a `text/event-stream` of snapshot and deltas. */
export const makeLive = (endpoint: Endpoint.Endpoint, procedure: Procedure.Any, scopes: ReadonlyArray<string>, env: Steps.Env): Steps.Handler => {
  const readInput = QueryInput.reader(procedure.input.ast)
  const limiter = env.rateLimits === undefined ? undefined : RateLimit.limiter(endpoint, env.rateLimits)
  const live = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const invocation = { input: readInput(yield* HttpServerRequest.ParsedSearchParams), headers: request.headers }
    const recheck = scopes.length === 0 ? Effect.void : Effect.flatMap(
      env.runtime.resolveSubject(request.headers),
      (subject) => {
        const refusal = Steps.scopeRefusal(subject, scopes)
        return refusal === undefined ? Effect.void : Effect.fail(refusal)
      }
    )
    const before = yield* Effect.either(recheck)
    if (Either.isLeft(before)) return HttpResponses.procedureError(before.left)
    if (request.method === "HEAD") {
      // The whole pipeline runs (guards included), but no subscription is opened.
      const once = yield* Effect.either(env.runtime.call(procedure, invocation))
      return Either.isLeft(once) ? HttpResponses.procedureError(once.left) : Sse.head()
    }
    return yield* LiveQuery.answer(env.runtime, procedure, invocation, recheck)
  })
  if (limiter === undefined) return live
  // Opening a stream is one request: counted before the first snapshot.
  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const resolved = yield* Effect.either(env.runtime.resolveSubject(request.headers))
    if (Either.isLeft(resolved)) return HttpResponses.procedureError(resolved.left)
    const checked = limiter.check(resolved.right, request)
    const verdict = RateLimit.isPending(checked) ? yield* checked : checked
    if (RateLimit.isRefusal(verdict)) return verdict
    const answered = yield* live
    return verdict === undefined ? answered : limiter.withHeaders(answered, verdict)
  })
}
