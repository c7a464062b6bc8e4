/**
 * The procedure runtime shared by every transport: resolve the caller through the app's auth
 * strategies, decode the input, run guards and interceptors, run the handler acting for the
 * caller (tenant scoping and provenance), and map every failure to a wire error (`ProcedureError`,
 * or one of the app's declared area errors, passed on with its own tag).
 */
import type { Headers } from "@effect/platform"
import { HttpClient } from "@effect/platform"
import { Cause, Context, Effect, Exit, Layer, Option, Queue, Ref, Schema, Scope, Stream } from "effect"
import * as AuthStrategy from "./AuthStrategy.js"
import type { ChangeEvent } from "../kernel/ChangeEvent.js"
import { ChangeTap } from "../kernel/ChangeTap.js"
import * as Provenance from "../kernel/Provenance.js"
import * as Telemetry from "../kernel/Telemetry.js"
import { Store, trackReads } from "../kernel/Store.js"
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
      hasHandlerContext ? Effect.provide(effect, handlerContext) : effect
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

    const resolveSubject = (headers: Headers.Headers) =>
      strategy.authenticate({ headers }).pipe(
        Effect.provideService(HttpClient.HttpClient, httpClient),
        Effect.flatMap((verdict) => {
          switch (verdict._tag) {
            case "Authenticated":
              return Effect.succeed(verdict.subject)
            case "Failed":
              return Effect.fail(new Errors.Unauthenticated({ reason: verdict.reason }))
            case "NoMatch":
              return Effect.succeed(Subject.anonymous)
          }
        })
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

    const call = (procedure: Procedure.Any, invocation: Invocation): Effect.Effect<unknown, Errors.WireError> => {
      const traceId = Provenance.traceIdOf(invocation.headers)
      return prepare(procedure, invocation, traceId).pipe(
        Effect.flatMap(({ run, subject }) => acting(procedure, subject, traceId, run, invocation.crossTenant)),
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

    const live = (procedure: Procedure.Any, invocation: Invocation): Stream.Stream<unknown, Errors.WireError> => {
      const traceId = Provenance.traceIdOf(invocation.headers)
      const encodeOutput = Schema.encodeUnknownSync(procedure.output)
      // The caller is re-resolved and the guards re-run before every push, so a revoked scope ends the stream.
      const first = (invocation: Invocation) => prepare(procedure, invocation, traceId).pipe(
        Effect.flatMap(({ run, subject }) =>
          acting(procedure, subject, traceId, trackReads(run)).pipe(
            Effect.map(([result, tables]) => ({ result, tables, subject }))
          )
        ),
        Telemetry.procedure(procedure.tag, procedure.kind, traceId)
      )
      return Stream.unwrapScoped(Effect.gen(function*() {
        yield* Effect.acquireRelease(Ref.update(open, (n) => n + 1), () => Ref.update(open, (n) => n - 1))
        const subject = invocation.subject ?? (yield* resolveSubject(invocation.headers))
        const input = yield* decodeInput(procedure, invocation.input)
        const key = LiveGroups.shareKey(procedure, subject, input)
        // The shared re-run acts as the first member (its headers and trace id).
        const ctx: Procedure.HandlerContext = { subject, store: storeOf(procedure), headers: invocation.headers, traceId }
        const rerun = acting(procedure, subject, traceId, trackReads(withHandlerContext(
          Effect.suspend(() => procedure.handler(input, ctx))
        ))).pipe(Effect.exit)
        const group = yield* groups.join(key ?? crypto.randomUUID(), subject.tenantId, rerun)
        const wake = yield* Effect.makeLatch(false)
        yield* Effect.acquireRelease(
          Effect.sync(() => group.waiting.add(wake)),
          () => Effect.sync(() => group.waiting.delete(wake))
        )
        // A re-run published from here on may postdate the first run: it is compared, not skipped.
        let seen = group.latest
        let current = yield* first({ ...invocation, subject })
        for (const table of current.tables) group.tables.add(table)
        group.known = true
        let last = JSON.stringify(encodeOutput(current.result))
        /**
         * The member's own check of a shared re-run: the caller re-resolved, the input decoded, the
         * guards and interceptors run as for a call, around the shared handler result. A caller that
         * now resolves to another subscription (other tenant or scopes) runs the handler itself.
         */
        const check = (shared: LiveGroups.SharedRun) =>
          prepare(procedure, invocation, traceId, (subject) =>
            key !== undefined && LiveGroups.shareKey(procedure, subject, input) === key ? shared.exit : undefined
          ).pipe(
            Effect.flatMap(({ run, subject }) =>
              acting(procedure, subject, traceId, trackReads(run)).pipe(
                Effect.map(([result, tables]) => ({ result, tables, subject }))
              )
            )
          )
        const next = Effect.gen(function*() {
          while (true) {
            yield* wake.await
            yield* wake.close
            const shared = group.latest
            if (shared === undefined || shared === seen) continue
            seen = shared
            const checked = yield* check(shared)
            for (const table of checked.tables) group.tables.add(table)
            current = { ...checked, tables: new Set([...shared.tables, ...checked.tables]) }
            const encoded = Exit.isSuccess(shared.exit) && shared.exit.value === current.result
              ? (shared.encoded ??= JSON.stringify(encodeOutput(current.result)))
              : JSON.stringify(encodeOutput(current.result))
            if (encoded === last) continue
            last = encoded
            return current.result
          }
        })
        const subscriptionId = crypto.randomUUID()
        const pushes = pushObservers.length === 0 ? Stream.repeatEffect(next) : Stream.repeatEffect(next).pipe(
          Stream.tap(() =>
            observePush({
              procedure: procedure.tag,
              subscriptionId,
              subjectId: current.subject.id,
              tenantId: current.subject.tenantId,
              traceId,
              tables: current.tables
            })
          )
        )
        return Stream.concat(Stream.succeed(current.result), pushes)
      })).pipe(
        Stream.catchAllCause((cause) => Stream.fromEffect(toProcedureError(cause, traceId, procedure.tag, isAreaError)))
      )
    }

    return Runtime.of({ app, resolveSubject, authorize, call, live, liveSubscriptions: Ref.get(open), withHandlerContext })
  })

/** The runtime layer of `app`. */
export const layer = (app: App): Layer.Layer<Runtime, never, Store | ChangeTap | HttpClient.HttpClient> =>
  Layer.effect(Runtime, make(app))
