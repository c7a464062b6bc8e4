/**
 * The steps every REST endpoint shares: the sunset gate and the capped body read (run before
 * anything endpoint-specific), the caller's trace id, guards, acting for the caller, and the
 * idempotency claim around the handler.
 */
import type { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { Scope } from "effect"
import { Effect, Either, FiberRef, Option } from "effect"
import * as Guard from "../app/Guard.js"
import * as Errors from "../app/Errors.js"
import type { RuntimeShape } from "../app/Runtime.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import type * as Endpoint from "./Endpoint.js"
import * as Idempotency from "./Idempotency.js"
import type { IdempotencyStoreShape } from "./IdempotencyStore.js"
import * as Lifecycle from "./Lifecycle.js"
import type * as RateLimit from "./RateLimit.js"
import * as RequestBody from "./RequestBody.js"
import * as RestRoute from "./RestRoute.js"

/** What every endpoint handler uses. */
export interface Env {
  readonly runtime: RuntimeShape
  readonly store: StoreShape
  /** The idempotency binding, when the app turned it on. */
  readonly idempotency: { readonly settings: Idempotency.Settings; readonly store: IdempotencyStoreShape } | undefined
  /** The rate-limit counters, when an endpoint declares a limit. */
  readonly rateLimits: RateLimit.Env | undefined
}

/** A mounted handler: everything it needs comes from the router. */
export type Handler = Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  never,
  HttpServerRequest.HttpServerRequest | HttpRouter.RouteContext | HttpServerRequest.ParsedSearchParams | Scope.Scope
>

/**
 * The steps before anything endpoint-specific: the sunset gate (410), then for body methods the
 * multipart refusal (415) and the body read within `bodyCap` (413). Right: the body (`undefined`
 * when empty or not read); left: the answer. `undefined` when the endpoint has neither step: GET
 * routes without a sunset skip it entirely (measurably faster than yielding a no-op per request).
 */

export const prologue = (endpoint: Endpoint.Endpoint, bodyCap: number) => {
  const gate = endpoint.lifecycle.sunset === undefined ? undefined : Lifecycle.gate(endpoint.lifecycle)
  const readsBody = RestRoute.mutatingMethods.has(endpoint.method)
  if (gate === undefined && !readsBody) return undefined
  return (
    request: HttpServerRequest.HttpServerRequest
  ): Effect.Effect<Either.Either<Uint8Array | undefined, HttpServerResponse.HttpServerResponse>> =>
    Effect.gen(function*() {
      if (gate !== undefined) {
        const gone = yield* gate
        if (gone !== undefined) return Either.left(gone)
      }
      if (!readsBody) return Either.right(undefined)
      if (RequestBody.isMultipart(request.headers)) return Either.left(RequestBody.multipartRefused())
      if (!RequestBody.announcesBody(request.headers)) return Either.right(undefined)
      return yield* Effect.either(RequestBody.read(request, bodyCap))
    })
}


/**
 * Runs guards synchronously while they answer synchronously (the common case), falling back to
 * `Guard.runGuards` from the first effectful one. `undefined`: every guard passed. A flag guard's
 * `FlagDisabled` stays a failure, so the route answers it as gated procedures do.
 */
export const checkGuards = (
  guards: ReadonlyArray<Guard.Guard>,
  ctx: Guard.Context
): Guard.Refusal | undefined | Effect.Effect<Guard.Refusal | undefined, Guard.FlagDisabled> => {
  for (let i = 0; i < guards.length; i++) {
    const result = guards[i]!(ctx)
    if (Effect.isEffect(result)) {
      return Effect.flatMap(result, (refusal) =>
        refusal ? Effect.succeed(refusal) : Guard.runGuards(guards.slice(i + 1), ctx).pipe(
          Effect.as(undefined),
          Effect.catchTag("GuardRefused", (refused) => Effect.succeed<Guard.Refusal>({ status: refused.status, message: refused.message }))
        ))
    }
    if (result) return result
  }
  return undefined
}

/** The refusal for the first of `scopes` the subject lacks (as `requireScope` would answer). */
export const scopeRefusal = (subject: Subject.Subject, scopes: ReadonlyArray<string>): Errors.ProcedureError | undefined => {
  for (const scope of scopes) {
    if (!Subject.hasScope(subject, scope)) return new Guard.GuardRefused({ status: 403, message: `missing scope "${scope}"` })
  }
  return undefined
}

/**
 * Runs `effect` (a handler's) acting for `subject` (tenant-scoped store access) with `provenance`
 * on its writes. The request fiber is set to act so for the rest of the request rather than around
 * the handler alone: nothing after the handler reaches the store (encoding, the answer, the
 * idempotency record), and this spares two `locally` regions on every request. An answer the
 * handler gives at once reads no fiber ref: the caller answers it without this (`RouteEndpoint`).
 */
export const actingFor = <A>(
  subject: Subject.Subject,
  provenance: Provenance.Provenance,
  effect: Effect.Effect<A, unknown>
): Effect.Effect<A, unknown> =>
  FiberRef.set(Subject.currentSubject, Option.some(subject)).pipe(
    Effect.zipRight(FiberRef.set(Provenance.current, provenance)),
    Effect.zipRight(effect)
  )

const splitUrl = (url: string) => {
  const at = url.indexOf("?")
  return at === -1 ? { path: url, query: "" } : { path: url.slice(0, at), query: url.slice(at + 1) }
}

/**
 * The idempotency claim around `run`, when the binding claims this endpoint and the request
 * carries a key (a malformed key is answered 400); `undefined` otherwise, and `run` is the
 * caller's to run.
 */
export const underKey = (
  env: Env,
  endpoint: Endpoint.Endpoint,
  request: HttpServerRequest.HttpServerRequest,
  subject: Subject.Subject,
  bytes: Uint8Array | undefined,
  run: () => Effect.Effect<Idempotency.Outcome, never, Scope.Scope>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, Scope.Scope> | undefined => {
  const binding = endpoint.claimable ? env.idempotency : undefined
  if (binding === undefined) return undefined
  const key = Idempotency.keyOf(request.headers, binding.settings)
  if (key === undefined) return undefined
  if (key === null) return Effect.succeed(Idempotency.keyInvalid(binding.settings))
  const url = splitUrl(request.url)
  return Idempotency.guarded(
    binding.store,
    { tenant: subject.tenantId ?? "", method: endpoint.method, path: url.path, key },
    Idempotency.fingerprint(endpoint.method, url.path, url.query, bytes),
    binding.settings,
    Effect.suspend(run)
  )
}
