/**
 * The procedure runtime shared by every transport: resolve the caller through the app's auth
 * strategies, decode the input, run guards and interceptors, run the handler acting for the
 * caller (tenant scoping and provenance), and map every failure to a wire error (`ProcedureError`,
 * or one of the app's declared area errors, passed on with its own tag). The service and its
 * wiring live here; one call in `Call`, live subscriptions in `LiveSubscriptions`.
 */
import type { Headers } from "@effect/platform"
import { HttpClient } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import type { Scope, Stream } from "effect"
import * as AuthStrategy from "./AuthStrategy.js"
import { ChangeTap } from "../kernel/changes/ChangeTap.js"
import * as Now from "../kernel/Now.js"
import * as Telemetry from "../kernel/Telemetry.js"
import { Store } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import type { App } from "./App.js"
import * as Call from "./Call.js"
import type { Invocation } from "./Call.js"
import * as Errors from "./Errors.js"
import * as LiveSubscriptions from "./LiveSubscriptions.js"
import type { LiveSubscription } from "./LiveSubscriptions.js"
import * as PluginServices from "./PluginServices.js"
import type * as Procedure from "./Procedure.js"

export type { Invocation } from "./Call.js"
export type { LiveListener, LiveSubscription, LiveValue } from "./LiveSubscriptions.js"
export { toProcedureError } from "./Call.js"

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
    const interceptors = app.plugins.flatMap((plugin) =>
      (plugin.interceptors ?? []).map((interceptor) => ({
        interceptor,
        traced: Telemetry.span(`fw.plugin ${plugin.name} intercept`, { "fw.plugin": plugin.name, "fw.hook": "intercept" }),
        services: PluginServices.services(plugin, store, httpClient)
      }))
    )

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

    const wiring: Call.Wiring = { isAreaError, storeOf, withHandlerContext, interceptors, resolveSubject }
    const calls = Call.make(wiring)
    const { subscribe, live, liveSubscriptions } = yield* LiveSubscriptions.make(app, store, tap, httpClient, tenantFields, wiring, calls)
    const { call, authorize } = calls

    return Runtime.of({ app, resolveSubject, authorize, call, live, subscribe, liveSubscriptions, withHandlerContext })
  })

/** The runtime layer of `app`. */
export const layer = (app: App): Layer.Layer<Runtime, never, Store | ChangeTap | HttpClient.HttpClient> =>
  Layer.effect(Runtime, make(app))
