/**
 * Live subscriptions: a query run, then re-run after every committed change to a table it read.
 * Identical subscriptions share one re-run per change (`LiveGroups`); each member's caller, guards
 * and interceptors are re-checked (through the call path) before every push, synchronously when
 * every check answers at once (`listen`).
 */
import { Effect, Exit, Queue, Ref, Schema, Stream } from "effect"
import type { Cause, Scope } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type { ChangeTapShape } from "../kernel/changes/ChangeTap.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import * as Telemetry from "../kernel/Telemetry.js"
import { trackReads } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import type { App } from "./App.js"
import * as Call from "./Call.js"
import type * as Errors from "./Errors.js"
import * as Guard from "./Guard.js"
import * as LiveGroups from "./LiveGroups.js"
import type { LivePush } from "./Plugin.js"
import * as PluginServices from "./PluginServices.js"
import type * as Procedure from "./Procedure.js"
import type { StoreShape } from "../kernel/store/StoreShape.js"
import type { HttpClient } from "@effect/platform"

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

/** The outcome of `effect` when it is one already (`Effect.succeed`, `Effect.fail`), without running it. */
const answeredNow = <A, E>(effect: Effect.Effect<A, E>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(effect) ? effect as Exit.Exit<A, E> : undefined

/** Builds the live subscriptions of `app` over the call path and the change tap. */
export const make = (
  app: App,
  store: StoreShape,
  tap: ChangeTapShape,
  httpClient: HttpClient.HttpClient,
  tenantFields: ReadonlyMap<string, string | undefined>,
  wiring: Call.Wiring,
  calls: Call.CallPath
) =>
  Effect.gen(function*() {
    const { isAreaError, storeOf, withHandlerContext, interceptors, resolveSubject } = wiring
    const { prepare, acting } = calls
    const liveSources = app.plugins.flatMap((plugin) => plugin.liveSources ?? [])
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
      invocation: Call.Invocation
    ): Effect.Effect<LiveSubscription, Errors.WireError, Scope.Scope> => {
      const traceId = Provenance.traceIdOf(invocation.headers)
      const encodeOutput = Schema.encodeUnknownSync(procedure.output)
      const toWire = (cause: Cause.Cause<unknown>) => Call.toProcedureError(cause, traceId, procedure.tag, isAreaError)
      // The caller is re-resolved and the guards re-run before every push, so a revoked scope ends the stream.
      const first = (invocation: Call.Invocation) => prepare(procedure, invocation, traceId).pipe(
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
        const input = yield* Call.decodeInput(procedure, invocation.input)
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
        // Interceptors that provide services to handlers (`sharedRuns`) wrap the shared handler run too.
        const call: Procedure.Call = { kind: procedure.kind, tag: procedure.tag, input, subject, headers: invocation.headers, traceId }
        const handled = interceptors
          .filter(({ interceptor }) => interceptor.kind === procedure.kind && interceptor.sharedRuns === true)
          .reduceRight<Effect.Effect<unknown, unknown>>(
            (next, { interceptor, services, traced }) => traced(Effect.provide(interceptor.intercept(call, next), services)),
            withHandlerContext(Effect.suspend(() => procedure.handler(input, ctx)))
          )
        const rerun = acting(procedure, subject, traceId, trackReads(handled)).pipe(Effect.exit)
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
        /**
         * The rest of a member's direct check from its first effectful guard (`index`, whose
         * `verdict` it is): the remaining guards acting for the caller, with read tracking, around the
         * shared result. The guards that passed before it are not run again.
         */
        const checkFrom = (
          shared: LiveGroups.SharedRun,
          subject: Subject.Subject,
          ctx: Procedure.HandlerContext,
          index: number,
          verdict: Effect.Effect<Guard.Refusal | undefined | void, unknown>
        ) => {
          const rest = Effect.flatMap(verdict, (refusal): Effect.Effect<void, unknown> =>
            refusal
              ? Effect.fail(new Guard.GuardRefused({ status: refusal.status, message: refusal.message }))
              : Guard.runGuards(procedure.guards.slice(index + 1), ctx))
          return acting(procedure, subject, traceId, trackReads(withHandlerContext(Effect.zipRight(rest, shared.exit)))).pipe(
            Effect.map(([result, tables]) => ({ result, tables, subject }))
          )
        }
        const check = (shared: LiveGroups.SharedRun) =>
          !direct ? guarded(shared) : Effect.flatMap(
            invocation.subject === undefined ? resolveSubject(invocation.headers) : Effect.succeed(invocation.subject),
            (subject) => {
              if (!inGroup(subject)) return guarded(shared)
              const ctx: Procedure.HandlerContext = { subject, store, headers: invocation.headers, traceId }
              const guards = procedure.guards
              for (let i = 0; i < guards.length; i++) {
                const verdict = guards[i]!(ctx)
                if (Effect.isEffect(verdict)) return checkFrom(shared, subject, ctx, i, verdict)
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
        // Where the synchronous check stopped at an effectful guard: the next `poll` goes on from there.
        let resumeAt: {
          readonly shared: LiveGroups.SharedRun
          readonly subject: Subject.Subject
          readonly ctx: Procedure.HandlerContext
          readonly index: number
          readonly verdict: Effect.Effect<Guard.Refusal | undefined | void, unknown>
        } | undefined
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
            const resume = resumeAt
            resumeAt = undefined
            if (shared === undefined || shared === seen) return Effect.succeed(undefined)
            seen = shared
            const checked = resume !== undefined && resume.shared === shared
              ? checkFrom(shared, resume.subject, resume.ctx, resume.index, resume.verdict)
              : check(shared)
            return Effect.flatMap(checked, (checked) => pushed(shared, checked))
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
            const guards = procedure.guards
            for (let index = 0; index < guards.length; index++) {
              const verdict = guards[index]!(ctx)
              if (Effect.isEffect(verdict)) {
                resumeAt = { shared, subject, ctx, index, verdict }
                return wake.unsafeOpen()
              }
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

    const live = (procedure: Procedure.Any, invocation: Call.Invocation): Stream.Stream<unknown, Errors.WireError> =>
      Stream.unwrapScoped(Effect.map(subscribe(procedure, invocation), ({ first, poll }) => {
        const next: Effect.Effect<unknown, Errors.WireError> = Effect.flatMap(poll, (value) => value === undefined ? next : Effect.succeed(value.result))
        return Stream.concat(Stream.succeed(first.result), Stream.repeatEffect(next))
      }))

    return { subscribe, live, liveSubscriptions: Ref.get(open) }
  })
