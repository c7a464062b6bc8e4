/**
 * One call of a procedure, shared by every transport: the input decoded (synchronously when the
 * schema allows), the guards checked (synchronous ones before any effect is built), interceptors
 * around them, the handler run acting for the caller (tenant scoping and provenance), and every
 * failure mapped to a wire error. `Runtime` wires it; `LiveSubscriptions` re-checks with it.
 */
import type { Headers } from "@effect/platform"
import { Cause, Effect, Either, Option, Schema } from "effect"
import type { Context, FiberId, FiberRef } from "effect"
import { FiberRefs } from "effect"
import * as Now from "../kernel/Now.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import * as Telemetry from "../kernel/Telemetry.js"
import type { StoreShape } from "../kernel/store/StoreShape.js"
import * as Subject from "../kernel/Subject.js"
import * as Errors from "./Errors.js"
import * as Guard from "./Guard.js"
import type { Interceptor, Services } from "./Plugin.js"
import type * as Procedure from "./Procedure.js"

/** How a call arrives: its raw input, the request headers, and optionally an already-resolved subject. */
export interface Invocation {
  readonly input: unknown
  readonly headers: Headers.Headers
  /** Skip auth resolution (inspect invocations run as a chosen subject). */
  readonly subject?: Subject.Subject
  /** Run as the system, across tenants (inspect invocations without a tenant). Never set from a request. */
  readonly crossTenant?: boolean
  /**
   * The call is all its fiber runs that reads the caller (a transport started the fiber for it and
   * only writes the answer after): the caller's subject and provenance are set on the fiber and
   * not put back, which saves the finalizer that restores them.
   */
  readonly ownsFiber?: boolean
  /**
   * The call's trace id, when the transport resolved it (`Provenance.traceIdOf` of `headers`) to
   * log what it does after the call under the same id; else resolved here.
   */
  readonly traceId?: string
}

const isProcedureError = Schema.is(Errors.ProcedureError)

const isStatusError = (error: unknown): error is { readonly status: number; readonly message: string } =>
  typeof error === "object" && error !== null && "status" in error && "message" in error &&
  typeof error.status === "number" && typeof error.message === "string" && error.status >= 400 && error.status < 600

const noAreaErrors = Errors.isAreaErrorOf([])

/**
 * Maps a failure cause to the wire error; unexpected causes are logged with the trace id and
 * hidden. An error `isAreaError` recognises (one the app declared) is passed on as it is; any
 * other error with a `status` becomes a `ProcedureFailure`.
 */
export const toProcedureError = (
  cause: Cause.Cause<unknown>,
  traceId: string,
  tag: string,
  isAreaError: (error: unknown) => error is Errors.AreaError = noAreaErrors
): Effect.Effect<never, Errors.WireError> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (isProcedureError(error)) return Effect.flatMap(Errors.forClient(error, traceId), Effect.fail)
    if (isAreaError(error)) return Effect.fail(error)
    if (isStatusError(error)) return Effect.fail(new Errors.ProcedureFailure({ status: error.status, message: error.message }))
  }
  return Effect.logError(`procedure "${tag}" failed unexpectedly`, cause).pipe(
    Effect.annotateLogs({ traceId }),
    Effect.zipRight(Effect.fail(new Errors.InternalError({ message: "internal error", traceId })))
  )
}

/** The input decoded with every error reported; an invalid input is `InputInvalid`. */
export const decodeInput = (procedure: Procedure.Any, input: unknown) =>
  Schema.decodeUnknown(procedure.input)(input, { errors: "all", onExcessProperty: "ignore" }).pipe(
    Effect.mapError((error) =>
      new Errors.InputInvalid({ message: Errors.describeParseError(error) })
    )
  )

/** The fiber members `actingDirect` uses (what `FiberRef.set` itself reaches, as a fiber reads and replaces its refs). */
interface FiberRefAccess {
  readonly id: () => FiberId.Single
  readonly getFiberRef: <A>(ref: FiberRef.FiberRef<A>) => A
  readonly getFiberRefs: () => FiberRefs.FiberRefs
  readonly setFiberRefs: (fiberRefs: FiberRefs.FiberRefs) => void
}

/** `subject` and `provenance` set as the fiber's own values: one copy of its fiber refs, where `setFiberRef` twice copies twice. */
const setActing = (fiber: FiberRefAccess, subject: Option.Option<Subject.Subject>, provenance: Provenance.Provenance) => {
  const id = fiber.id()
  fiber.setFiberRefs(FiberRefs.updateManyAs(fiber.getFiberRefs(), {
    entries: [[Subject.currentSubject, [[id, subject]]], [Provenance.current, [[id, provenance]]]]
  }))
}

/**
 * `effect` acting for `subject` (or as the system) with `provenance`: what `Subject.actingAs` and
 * `Provenance.withProvenance` do, in one step that sets both fiber refs and one finalizer that puts
 * them back (two `Effect.locally` cost two acquire/use/release brackets per call).
 */
const actingDirect = <A, E>(
  effect: Effect.Effect<A, E>,
  subject: Option.Option<Subject.Subject>,
  provenance: Provenance.Provenance
): Effect.Effect<A, E> =>
  Effect.withFiberRuntime((runtimeFiber) => {
    const fiber = runtimeFiber as unknown as FiberRefAccess
    const previousSubject = fiber.getFiberRef(Subject.currentSubject)
    const previousProvenance = fiber.getFiberRef(Provenance.current)
    setActing(fiber, subject, provenance)
    return Effect.ensuring(effect, Effect.sync(() => setActing(fiber, previousSubject, previousProvenance)))
  })

/** `effect` acting for `subject` with `provenance` on a fiber the call owns (`Invocation.ownsFiber`): set, never put back. */
const actingOwned = <A, E>(
  effect: Effect.Effect<A, E>,
  subject: Option.Option<Subject.Subject>,
  provenance: Provenance.Provenance
): Effect.Effect<A, E> =>
  Effect.withFiberRuntime((runtimeFiber) => {
    setActing(runtimeFiber as unknown as FiberRefAccess, subject, provenance)
    return effect
  })

/** What a call of one procedure needs that does not depend on the call, made on its first call. */
interface Plan {
  /** The input decoded synchronously; Left when the effectful decode must answer (an invalid input, or an async schema). */
  readonly decode: (input: unknown) => Either.Either<unknown, unknown>
  readonly store: StoreShape
  /** No interceptor wraps this procedure's kind: guards and handler run without the interceptor chain. */
  readonly direct: boolean
}

/** An interceptor of a plugin, with its span and the plugin's services. */
export interface WiredInterceptor {
  readonly interceptor: Interceptor
  readonly traced: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  readonly services: Context.Context<Services>
}

/** What the call path takes from the runtime's wiring. */
export interface Wiring {
  readonly isAreaError: (error: unknown) => error is Errors.AreaError
  /** The store a procedure's handler and guards get (a plugin's procedures: the plugin's). */
  readonly storeOf: (procedure: Procedure.Any) => StoreShape
  readonly withHandlerContext: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E>
  readonly interceptors: ReadonlyArray<WiredInterceptor>
  readonly resolveSubject: (headers: Headers.Headers) => Effect.Effect<Subject.Subject, Errors.Unauthenticated>
}

/** Builds the call path over the runtime's wiring. */
export const make = (wiring: Wiring) => {
  const { isAreaError, storeOf, withHandlerContext, interceptors, resolveSubject } = wiring

  /**
   * Decodes and authorises a call, returning the effect that runs its handler. `sharedResult`
   * may stand in for the handler (a live re-run shared by identical subscriptions): the guards
   * and interceptors still run for this caller around it.
   */
  const prepare = (
    procedure: Procedure.Any,
    invocation: Invocation,
    traceId: string,
    sharedResult?: (subject: Subject.Subject) => Effect.Effect<unknown, unknown> | undefined
  ) =>
    Effect.gen(function*() {
      const subject = invocation.subject ?? (yield* resolveSubject(invocation.headers))
      const input = yield* decodeInput(procedure, invocation.input)
      const ctx: Procedure.HandlerContext = { subject, store: storeOf(procedure), headers: invocation.headers, traceId }
      const guarded = withHandlerContext(Effect.zipRight(
        Guard.runGuards(procedure.guards, ctx),
        sharedResult?.(subject) ?? Effect.suspend(() => procedure.handler(input, ctx))
      ))
      const call: Procedure.Call = {
        kind: procedure.kind,
        tag: procedure.tag,
        input,
        subject,
        headers: invocation.headers,
        traceId
      }
      const intercepted = interceptors
        .filter(({ interceptor }) => interceptor.kind === procedure.kind)
        .reduceRight<Effect.Effect<unknown, unknown>>(
          (next, { interceptor, services, traced }) =>
            traced(Effect.provide(interceptor.intercept(call, next), services)),
          guarded
        )
      return { subject, run: intercepted }
    })

  const acting = <A, E>(
    procedure: Procedure.Any,
    subject: Subject.Subject,
    traceId: string,
    effect: Effect.Effect<A, E>,
    crossTenant = false
  ) =>
    effect.pipe(
      crossTenant ? Subject.asSystem : Subject.actingAs(subject),
      Provenance.withProvenance({ traceId, subjectId: subject.id, procedure: procedure.tag }),
    )

  const plans = new Map<Procedure.Any, Plan>()
  const planOf = (procedure: Procedure.Any): Plan => {
    let plan = plans.get(procedure)
    if (plan === undefined) {
      plan = {
        decode: Schema.decodeUnknownEither(procedure.input, { errors: "all", onExcessProperty: "ignore" }),
        store: storeOf(procedure),
        direct: !interceptors.some(({ interceptor }) => interceptor.kind === procedure.kind)
      }
      plans.set(procedure, plan)
    }
    return plan
  }

  /**
   * The guards and the handler of a call without interceptors, acting for the caller. Guards
   * that answer synchronously (scopes, roles) are checked here, before any effect is built; from
   * the first effectful guard on, the rest run as `Guard.runGuards` would, acting for the caller.
   */
  const guardedHandler = (
    procedure: Procedure.Any,
    plan: Plan,
    invocation: Invocation,
    subject: Subject.Subject,
    input: unknown,
    traceId: string
  ): Effect.Effect<unknown, unknown> => {
    const ctx: Procedure.HandlerContext = { subject, store: plan.store, headers: invocation.headers, traceId }
    const guards = procedure.guards
    let rest: Effect.Effect<unknown, unknown> | undefined
    for (let i = 0; i < guards.length; i++) {
      const verdict = guards[i]!(ctx)
      if (Effect.isEffect(verdict)) {
        const remaining = guards.slice(i + 1)
        rest = Effect.flatMap(verdict, (refusal) =>
          refusal ? new Guard.GuardRefused({ status: refusal.status, message: refusal.message }) : Guard.runGuards(remaining, ctx))
        break
      }
      if (verdict) return Effect.fail(new Guard.GuardRefused({ status: verdict.status, message: verdict.message }))
    }
    const handler = Effect.suspend(() => procedure.handler(input, ctx))
    return (invocation.ownsFiber === true ? actingOwned : actingDirect)(
      withHandlerContext(rest === undefined ? handler : Effect.zipRight(rest, handler)),
      invocation.crossTenant === true ? Option.none() : Option.some(subject),
      { traceId, subjectId: subject.id, procedure: procedure.tag }
    )
  }

  const call = (procedure: Procedure.Any, invocation: Invocation): Effect.Effect<unknown, Errors.WireError> => {
    const traceId = invocation.traceId ?? Provenance.traceIdOf(invocation.headers)
    const plan = planOf(procedure)
    const run: Effect.Effect<unknown, unknown> = plan.direct
      // A caller resolved at once (a synchronous strategy, a given subject) goes on now: no fiber step.
      ? Now.flatMap(
        invocation.subject === undefined ? resolveSubject(invocation.headers) : Effect.succeed(invocation.subject),
        (subject) => {
          // Applied now or in the fiber: a guard that throws is a defect either way, as in a fiber.
          try {
            const decoded = plan.decode(invocation.input)
            return Either.isRight(decoded)
              ? guardedHandler(procedure, plan, invocation, subject, decoded.right, traceId)
              : Effect.flatMap(decodeInput(procedure, invocation.input), (input) =>
                guardedHandler(procedure, plan, invocation, subject, input, traceId))
          } catch (defect) {
            return Effect.die(defect)
          }
        }
      )
      : Effect.flatMap(prepare(procedure, invocation, traceId), ({ run, subject }) =>
        acting(procedure, subject, traceId, run, invocation.crossTenant))
    return run.pipe(
      Effect.catchAllCause((cause) => toProcedureError(cause, traceId, procedure.tag, isAreaError)),
      Telemetry.procedure(procedure.tag, procedure.kind, traceId)
    )
  }

  const authorize = (procedure: Procedure.Any, invocation: Invocation): Effect.Effect<void, Errors.WireError> => {
    const traceId = Provenance.traceIdOf(invocation.headers)
    return Effect.gen(function*() {
      const subject = invocation.subject ?? (yield* resolveSubject(invocation.headers))
      yield* decodeInput(procedure, invocation.input)
      const ctx: Procedure.HandlerContext = { subject, store: storeOf(procedure), headers: invocation.headers, traceId }
      yield* acting(procedure, subject, traceId, withHandlerContext(Guard.runGuards(procedure.guards, ctx)), invocation.crossTenant)
    }).pipe(Effect.catchAllCause((cause) => toProcedureError(cause, traceId, procedure.tag, isAreaError)))
  }

  return { prepare, acting, call, authorize }
}

/** The call path (see `make`). */
export type CallPath = ReturnType<typeof make>
