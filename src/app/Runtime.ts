/**
 * The procedure runtime shared by every transport: resolve the caller through the app's auth
 * strategies, decode the input, run guards and interceptors, run the handler acting for the
 * caller (tenant scoping and provenance), and map every failure to a wire error (`ProcedureError`,
 * or one of the app's declared area errors, passed on with its own tag).
 */
import type { Headers } from "@effect/platform"
import { HttpClient } from "@effect/platform"
import { Cause, Context, Effect, Either, Exit, Layer, Option, Queue, Ref, Schema, Scope, Stream } from "effect"
import type { FiberId, FiberRef } from "effect"
import { FiberRefs } from "effect"
import * as AuthStrategy from "./AuthStrategy.js"
import type { ChangeEvent } from "../kernel/ChangeEvent.js"
import { ChangeTap } from "../kernel/ChangeTap.js"
import * as Now from "../kernel/Now.js"
import * as Provenance from "../kernel/Provenance.js"
import * as Telemetry from "../kernel/Telemetry.js"
import { Store, trackReads } from "../kernel/Store.js"
import type { StoreShape } from "../kernel/StoreShape.js"
import * as Subject from "../kernel/Subject.js"
import type { App } from "./App.js"
import * as Errors from "./Errors.js"
import * as Guard from "./Guard.js"
import * as LiveGroups from "./LiveGroups.js"
import type { LivePush } from "./Plugin.js"
import * as PluginServices from "./PluginServices.js"
import type * as Procedure from "./Procedure.js"

/** How a call arrives: its raw input, the request headers, and optionally an already-resolved subject. */
export interface Invocation {
  readonly input: unknown
  readonly headers: Headers.Headers
  /** Skip auth resolution (inspect invocations run as a chosen subject). */
  readonly subject?: Subject.Subject
  /** Run as the system, across tenants (inspect invocations without a tenant). Never set from a request. */
  readonly crossTenant?: boolean
}

/** One value of a live subscription: the result, its encoded form and that form's JSON. */
export interface LiveValue {
  readonly result: unknown
  readonly encoded: unknown
  readonly json: string
  /** The group's shared re-run, when this value is its result passed through the member's checks unchanged. */
  readonly shared: LiveGroups.SharedRun | undefined
}

/** An open live subscription (see `RuntimeShape.subscribe`). */
export interface LiveSubscription {
  readonly first: LiveValue
  /**
   * Waits for a wake-up (a new shared re-run, or `nudge`), then re-checks the caller: the changed
   * value, or `undefined` when nothing changed for this subscriber. Fails with the refusal or error
   * that ends the subscription.
   */
  readonly poll: Effect.Effect<LiveValue | undefined, Errors.WireError>
  /** Wakes a pending `poll` (it answers `undefined` unless a result changed): a keep-alive's turn. */
  readonly nudge: () => void
  /**
   * Lets a transport that writes synchronously take changed values without running `poll`: while
   * `poll` is pending and `listener.ready()`, a change that this subscriber's checks pass without
   * running an effect (a caller resolved at once, guards that answer synchronously, no
   * interceptors or push observers) is handed to `listener.take` in the pass that announced it,
   * and `poll` keeps waiting. Anything else wakes `poll` as before.
   */
  readonly listen: (listener: LiveListener) => void
}

/** A synchronous taker of live values (see `LiveSubscription.listen`). */
export interface LiveListener {
  /** True when a value taken now would be written at once (the previous write went out). */
  readonly ready: () => boolean
  /** Takes a changed value, synchronously. */
  readonly take: (value: LiveValue) => void
}

/** The runtime service. */
export interface RuntimeShape {
  readonly app: App
  /** Resolves the caller; a `Failed` verdict is `Unauthenticated`, no match is anonymous. */
  readonly resolveSubject: (headers: Headers.Headers) => Effect.Effect<Subject.Subject, Errors.Unauthenticated>
  /**
   * Resolves the caller, decodes the input and runs the guards, without the handler: what must hold
   * before anything is claimed on the caller's behalf (an idempotency key).
   */
  readonly authorize: (procedure: Procedure.Any, invocation: Invocation) => Effect.Effect<void, Errors.WireError>
  /** Runs a procedure once; the output is decoded (the transport encodes it). */
  readonly call: (procedure: Procedure.Any, invocation: Invocation) => Effect.Effect<unknown, Errors.WireError>
  /**
   * Runs a query, then re-runs it after every committed change to a table it read, emitting changed
   * results. Identical subscriptions (same procedure, input and subject) share one re-run per change;
   * the handler of a shared re-run sees the first subscriber's headers and trace id. Each subscriber's
   * caller, guards and interceptors are still re-checked before every push.
   */
  readonly live: (procedure: Procedure.Any, invocation: Invocation) => Stream.Stream<unknown, Errors.WireError>
  /**
   * The subscription under `live`, for transports that frame pushes themselves: the first value,
   * then `poll` for each change. A value that is a group's shared re-run passed through unchanged
   * carries that run (`shared`), so work per re-run (framing, encoding) can be shared by its members.
   * Released with the scope.
   */
  readonly subscribe: (procedure: Procedure.Any, invocation: Invocation) => Effect.Effect<LiveSubscription, Errors.WireError, Scope.Scope>
  /** How many live subscriptions are open (each is released when its client unsubscribes or disconnects). */
  readonly liveSubscriptions: Effect.Effect<number>
  /**
   * Provides the services plugins offer to guards and handlers (`Plugin.handlerContext`, e.g. the
   * flags registry `requireFlag` reads) to `effect`: hand-written routes run under it too.
   */
  readonly withHandlerContext: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E>
}

/** The procedure runtime of the served app. */
export class Runtime extends Context.Tag("@fw/framework/Runtime")<Runtime, RuntimeShape>() {}


const isProcedureError = Schema.is(Errors.ProcedureError)

const isStatusError = (error: unknown): error is { readonly status: number; readonly message: string } =>
  typeof error === "object" && error !== null && "status" in error && "message" in error &&
  typeof error.status === "number" && typeof error.message === "string" && error.status >= 400 && error.status < 600

const noAreaErrors = Errors.isAreaErrorOf([])

/** The outcome of `effect` when it is one already (`Effect.succeed`, `Effect.fail`), without running it. */
const answeredNow = <A, E>(effect: Effect.Effect<A, E>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(effect) ? effect as Exit.Exit<A, E> : undefined

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

const decodeInput = (procedure: Procedure.Any, input: unknown) =>
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

/** What a call of one procedure needs that does not depend on the call, made on its first call. */
interface Plan {
  /** The input decoded synchronously; Left when the effectful decode must answer (an invalid input, or an async schema). */
  readonly decode: (input: unknown) => Either.Either<unknown, unknown>
  readonly store: StoreShape
  /** No interceptor wraps this procedure's kind: guards and handler run without the interceptor chain. */
  readonly direct: boolean
}

/** Builds the runtime of `app` over the provided store, change tap and HTTP client. */
export const make = (app: App) =>
  Effect.gen(function*() {
    const store = yield* Store
    const tap = yield* ChangeTap
    const httpClient = yield* HttpClient.HttpClient
    const strategy = AuthStrategy.composeAuthStrategies(app.auth)
    const isAreaError = Errors.isAreaErrorOf(app.errors)
    const tenantFields = new Map(app.tables.map((table) => [table.name, table.tenantField]))
    // A plugin's procedures get the plugin's store: read-only without `store:write`.
    const pluginStores = new Map(app.plugins.flatMap((plugin) => {
      const narrowed = Context.get(PluginServices.services(plugin, store, httpClient), Store)
      return (plugin.procedures ?? []).map((procedure) => [procedure.tag, narrowed] as const)
    }))
    const storeOf = (procedure: Procedure.Any) => pluginStores.get(procedure.tag) ?? store
    const handlerContext = app.plugins.reduce<Context.Context<never>>(
      (context, plugin) => plugin.handlerContext === undefined ? context : Context.merge(context, plugin.handlerContext),
      Context.empty()
    )
    const hasHandlerContext = app.plugins.some((plugin) => plugin.handlerContext !== undefined)
    const withHandlerContext = <A, E>(effect: Effect.Effect<A, E>) =>
      // An exit needs no services: it stays one (the request path answers it without a fiber).
      hasHandlerContext && Now.exitOf(effect) === undefined ? Effect.provide(effect, handlerContext) : effect
    const liveSources = app.plugins.flatMap((plugin) => plugin.liveSources ?? [])
    const interceptors = app.plugins.flatMap((plugin) =>
      (plugin.interceptors ?? []).map((interceptor) => ({
        interceptor,
        traced: Telemetry.span(`fw.plugin ${plugin.name} intercept`, { "fw.plugin": plugin.name, "fw.hook": "intercept" }),
        services: PluginServices.services(plugin, store, httpClient)
      }))
    )

    const pushObservers = app.plugins.flatMap((plugin) =>
      plugin.onLivePush === undefined ? [] : [{
        name: plugin.name,
        observe: plugin.onLivePush,
        services: PluginServices.services(plugin, store, httpClient)
      }]
    )
    const observePush = (push: LivePush) =>
      Effect.forEach(pushObservers, ({ name, observe, services }) =>
        observe(push).pipe(
          Effect.provide(services),
          Subject.asSystem,
          Telemetry.span(`fw.plugin ${name} onLivePush`, { "fw.plugin": name, "fw.hook": "onLivePush" }, push.traceId),
          Provenance.withProvenance({ traceId: push.traceId, subjectId: push.subjectId, procedure: push.procedure }),
          Effect.catchAllCause((cause) => Effect.logWarning(`plugin "${name}" failed to observe a live push`, cause))
        ), { discard: true })

    const anonymous = Effect.succeed(Subject.anonymous)
    const withClient = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>): Effect.Effect<A, E> =>
      Now.exitOf(effect) ?? Effect.provideService(effect, HttpClient.HttpClient, httpClient)
    // Without strategies every caller is anonymous: no strategy run per call (or per live push).
    const resolveSubject = (headers: Headers.Headers): Effect.Effect<Subject.Subject, Errors.Unauthenticated> =>
      app.auth.length === 0 ? anonymous : Now.flatMap(
        // A verdict given at once (a synchronous strategy) needs no client and no fiber step.
        withClient(strategy.authenticate({ headers })),
        (verdict) => {
          switch (verdict._tag) {
            case "Authenticated":
              return Effect.succeed(verdict.subject)
            case "Failed":
              return Effect.fail(new Errors.Unauthenticated({ reason: verdict.reason }))
            case "NoMatch":
              return Effect.succeed(Subject.anonymous)
          }
        }
      )

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
      return actingDirect(
        withHandlerContext(rest === undefined ? handler : Effect.zipRight(rest, handler)),
        invocation.crossTenant === true ? Option.none() : Option.some(subject),
        { traceId, subjectId: subject.id, procedure: procedure.tag }
      )
    }

    const call = (procedure: Procedure.Any, invocation: Invocation): Effect.Effect<unknown, Errors.WireError> => {
      const traceId = Provenance.traceIdOf(invocation.headers)
      const plan = planOf(procedure)
      const run: Effect.Effect<unknown, unknown> = plan.direct
        ? Effect.flatMap(
          invocation.subject === undefined ? resolveSubject(invocation.headers) : Effect.succeed(invocation.subject),
          (subject) => {
            const decoded = plan.decode(invocation.input)
            return Either.isRight(decoded)
              ? guardedHandler(procedure, plan, invocation, subject, decoded.right, traceId)
              : Effect.flatMap(decodeInput(procedure, invocation.input), (input) =>
                guardedHandler(procedure, plan, invocation, subject, input, traceId))
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

    /**
     * Committed changes, merged with the plugins' live sources when there are any (the common case
     * without them reads the tap's queue directly).
     */
    const subscribeChanges: Effect.Effect<Queue.Dequeue<ChangeEvent | LiveGroups.SourceSignal>, never, Scope.Scope> =
      liveSources.length === 0 ? tap.events : Effect.gen(function*() {
        const merged = yield* Queue.unbounded<ChangeEvent | LiveGroups.SourceSignal>()
        const events = yield* tap.events
        yield* Queue.take(events).pipe(Effect.flatMap((event) => Queue.offer(merged, event)), Effect.forever, Effect.forkScoped)
        for (const source of liveSources) {
          const signal: LiveGroups.SourceSignal = { _tag: "SourceSignal", name: source.name }
          const changes = yield* source.changes
          yield* Queue.take(changes).pipe(Effect.zipRight(Queue.offer(merged, signal)), Effect.forever, Effect.forkScoped)
        }
        return merged
      })

    const open = yield* Ref.make(0)
    const groups = LiveGroups.make(subscribeChanges, tenantFields)

    const subscribe = (
      procedure: Procedure.Any,
      invocation: Invocation
    ): Effect.Effect<LiveSubscription, Errors.WireError, Scope.Scope> => {
      const traceId = Provenance.traceIdOf(invocation.headers)
      const encodeOutput = Schema.encodeUnknownSync(procedure.output)
      const toWire = (cause: Cause.Cause<unknown>) => toProcedureError(cause, traceId, procedure.tag, isAreaError)
      // The caller is re-resolved and the guards re-run before every push, so a revoked scope ends the stream.
      const first = (invocation: Invocation) => prepare(procedure, invocation, traceId).pipe(
        Effect.flatMap(({ run, subject }) =>
          acting(procedure, subject, traceId, trackReads(run)).pipe(
            Effect.map(([result, tables]) => ({ result, tables, subject }))
          )
        ),
        Telemetry.procedure(procedure.tag, procedure.kind, traceId)
      )
      return Effect.gen(function*() {
        yield* Effect.acquireRelease(Ref.update(open, (n) => n + 1), () => Ref.update(open, (n) => n - 1))
        const subject = invocation.subject ?? (yield* resolveSubject(invocation.headers))
        const input = yield* decodeInput(procedure, invocation.input)
        const ofInput = LiveGroups.inputKey(procedure, input)
        const key = LiveGroups.shareKey(ofInput, subject)
        // The share key is JSON of the whole subject: computed again only for a subject object not
        // seen before (a strategy that re-resolves makes a new one; an anonymous or given caller does not).
        let keyed = subject
        const inGroup = (resolved: Subject.Subject) => {
          if (resolved === keyed) return true
          if (LiveGroups.shareKey(ofInput, resolved) !== key) return false
          keyed = resolved
          return true
        }
        // The shared re-run acts as the first member (its headers and trace id).
        const ctx: Procedure.HandlerContext = { subject, store: storeOf(procedure), headers: invocation.headers, traceId }
        const rerun = acting(procedure, subject, traceId, trackReads(withHandlerContext(
          Effect.suspend(() => procedure.handler(input, ctx))
        ))).pipe(Effect.exit)
        const group = yield* groups.join(key ?? crypto.randomUUID(), subject.tenantId, rerun)
        const wake = yield* Effect.makeLatch(false)
        // Set below: the member's wake-up call, which pushes synchronously when it can.
        let wakeNow: () => void = () => wake.unsafeOpen()
        const waker = () => wakeNow()
        yield* Effect.acquireRelease(
          Effect.sync(() => group.wakers.add(waker)),
          () => Effect.sync(() => group.wakers.delete(waker))
        )
        // A re-run published from here on may postdate the first run: it is compared, not skipped.
        let seen = group.latest
        const initial = yield* first({ ...invocation, subject })
        for (const table of initial.tables) group.tables.add(table)
        group.known = true
        const encoded = encodeOutput(initial.result)
        const firstValue: LiveValue = { result: initial.result, encoded, json: JSON.stringify(encoded), shared: undefined }
        let last = firstValue.json
        /**
         * The member's own check of a shared re-run: the caller re-resolved, the input decoded, the
         * guards and interceptors run as for a call, around the shared handler result. A caller that
         * now resolves to another subscription (other tenant or scopes) runs the handler itself.
         */
        const guarded = (shared: LiveGroups.SharedRun) =>
          prepare(procedure, invocation, traceId, (subject) =>
            key !== undefined && LiveGroups.shareKey(ofInput, subject) === key ? shared.exit : undefined
          ).pipe(
            Effect.flatMap(({ run, subject }) =>
              acting(procedure, subject, traceId, trackReads(run)).pipe(
                Effect.map(([result, tables]) => ({ result, tables, subject }))
              )
            )
          )
        // Without interceptors, a member whose re-resolved caller still belongs to the group needs
        // only its guards around the shared result. Guards that answer synchronously (the common
        // case: scopes, roles) read nothing through the store, so they run here without the acting
        // context or read tracking (and the input was decoded once); the first effectful guard
        // sends the member down the full path.
        const direct = key !== undefined && !interceptors.some(({ interceptor }) => interceptor.kind === procedure.kind)
        const store = storeOf(procedure)
        const noTables: ReadonlySet<string> = new Set()
        const check = (shared: LiveGroups.SharedRun) =>
          !direct ? guarded(shared) : Effect.flatMap(
            invocation.subject === undefined ? resolveSubject(invocation.headers) : Effect.succeed(invocation.subject),
            (subject) => {
              if (!inGroup(subject)) return guarded(shared)
              const ctx: Procedure.HandlerContext = { subject, store, headers: invocation.headers, traceId }
              for (const guard of procedure.guards) {
                const verdict = guard(ctx)
                if (Effect.isEffect(verdict)) return guarded(shared)
                if (verdict) return Effect.fail(new Guard.GuardRefused({ status: verdict.status, message: verdict.message }))
              }
              return Effect.map(shared.exit, (result) => ({ result, tables: noTables, subject }))
            }
          )
        const subscriptionId = crypto.randomUUID()
        /** The value to push for `result` after `shared`, or `undefined` when it is what was pushed last. */
        const valueOf = (shared: LiveGroups.SharedRun, result: unknown): LiveValue | undefined => {
          let value: LiveValue
          if (Exit.isSuccess(shared.exit) && shared.exit.value === result) {
            // The shared result passed through this member's checks unchanged: encoded once per re-run.
            if (shared.encoded === undefined) {
              const encoded = encodeOutput(result)
              shared.encoded = { value: encoded, json: JSON.stringify(encoded) }
            }
            value = { result, encoded: shared.encoded.value, json: shared.encoded.json, shared }
          } else {
            const encoded = encodeOutput(result)
            value = { result, encoded, json: JSON.stringify(encoded), shared: undefined }
          }
          if (value.json === last) return undefined
          last = value.json
          return value
        }
        const pushed = (shared: LiveGroups.SharedRun, checked: Effect.Effect.Success<ReturnType<typeof check>>) => {
          for (const table of checked.tables) group.tables.add(table)
          const value = valueOf(shared, checked.result)
          if (value === undefined || pushObservers.length === 0) return Effect.succeed(value)
          return Effect.as(observePush({
            procedure: procedure.tag,
            subscriptionId,
            subjectId: checked.subject.id,
            tenantId: checked.subject.tenantId,
            traceId,
            tables: new Set([...shared.tables, ...checked.tables])
          }), value)
        }
        // True while `poll` waits for its wake-up: a value taken synchronously then is one it would have answered.
        let parked = false
        // A refusal found by the synchronous check, answered by the next `poll` (guards run once per change).
        let refused: Guard.GuardRefused | undefined
        const startWaiting = Effect.sync(() => {
          parked = true
        })
        // Plain effects rather than a generator: this runs per subscriber per change.
        const poll: Effect.Effect<LiveValue | undefined, Errors.WireError> = Effect.zipRight(startWaiting, wake.await).pipe(
          Effect.flatMap(() => {
            parked = false
            wake.unsafeClose()
            if (refused !== undefined) return Effect.fail(refused)
            const shared = group.latest
            if (shared === undefined || shared === seen) return Effect.succeed(undefined)
            seen = shared
            return Effect.flatMap(check(shared), (checked) => pushed(shared, checked))
          }),
          Effect.catchAllCause(toWire)
        )
        // The synchronous check is `check`'s direct path when every step of it answers at once.
        const syncable = direct && pushObservers.length === 0
        const listen = (listener: LiveListener) => {
          if (!syncable) return
          wakeNow = () => {
            const shared = group.latest
            if (!parked || !listener.ready() || shared === undefined || shared === seen || !Exit.isSuccess(shared.exit)) {
              return wake.unsafeOpen()
            }
            const resolved = invocation.subject === undefined ? answeredNow(resolveSubject(invocation.headers)) : Exit.succeed(invocation.subject)
            if (resolved === undefined || !Exit.isSuccess(resolved)) return wake.unsafeOpen()
            const subject = resolved.value
            if (!inGroup(subject)) return wake.unsafeOpen()
            const ctx: Procedure.HandlerContext = { subject, store, headers: invocation.headers, traceId }
            for (const guard of procedure.guards) {
              const verdict = guard(ctx)
              if (Effect.isEffect(verdict)) return wake.unsafeOpen()
              if (verdict) {
                refused = new Guard.GuardRefused({ status: verdict.status, message: verdict.message })
                return wake.unsafeOpen()
              }
            }
            seen = shared
            const value = valueOf(shared, shared.exit.value)
            if (value !== undefined) listener.take(value)
          }
        }
        return { first: firstValue, poll, nudge: () => wake.unsafeOpen(), listen }
      }).pipe(Effect.catchAllCause(toWire))
    }

    const live = (procedure: Procedure.Any, invocation: Invocation): Stream.Stream<unknown, Errors.WireError> =>
      Stream.unwrapScoped(Effect.map(subscribe(procedure, invocation), ({ first, poll }) => {
        const next: Effect.Effect<unknown, Errors.WireError> = Effect.flatMap(poll, (value) => value === undefined ? next : Effect.succeed(value.result))
        return Stream.concat(Stream.succeed(first.result), Stream.repeatEffect(next))
      }))

    return Runtime.of({ app, resolveSubject, authorize, call, live, subscribe, liveSubscriptions: Ref.get(open), withHandlerContext })
  })

/** The runtime layer of `app`. */
export const layer = (app: App): Layer.Layer<Runtime, never, Store | ChangeTap | HttpClient.HttpClient> =>
  Layer.effect(Runtime, make(app))
