/**
 * Hosting plugins: checks their declarations at boot and hands each one only what its
 * permissions allow (a read-only Store without `store:write`, an HttpClient limited to the
 * declared `network:outbound:<host>` hosts).
 */
import { HttpClient } from "@effect/platform"
import { Context, Effect, ExecutionStrategy, FiberRef, Layer, Scope } from "effect"
import { ChangeTap } from "../kernel/changes/ChangeTap.js"
import type { PendingChange } from "../kernel/changes/ChangeTap.js"
import * as StageStatements from "../kernel/store/StageStatements.js"
import { Store } from "../kernel/store/Store.js"
import * as Telemetry from "../kernel/Telemetry.js"
import * as Plugin from "../app/Plugin.js"
import { outboundPrefix, services } from "../app/PluginServices.js"

/** Fails with `PluginInvalid` on an unknown permission or a contribution the plugin has no permission for. */
export const validate = (plugin: Plugin.Plugin): Effect.Effect<void, Plugin.PluginInvalid> => {
  const invalid = (message: string) => Effect.fail(new Plugin.PluginInvalid({ plugin: plugin.name, message }))
  for (const permission of plugin.permissions) {
    const known = Plugin.knownPermissions.includes(permission) ||
      (permission.startsWith(outboundPrefix) && permission.length > outboundPrefix.length)
    if (!known) return invalid(`unknown permission "${permission}"`)
  }
  const has = (permission: Plugin.Permission) => plugin.permissions.includes(permission)
  if (plugin.onChangeEvent && !has("store:changes:read")) {
    return invalid(`onChangeEvent needs the permission "store:changes:read"`)
  }
  if ((plugin.onStage || plugin.onStageStatements) && !(has("store:changes:read") && has("store:write"))) {
    return invalid(`${plugin.onStage ? "onStage" : "onStageStatements"} needs the permissions "store:changes:read" and "store:write"`)
  }
  if (plugin.onStageFused && !plugin.onStage && !plugin.onStageStatements) {
    return invalid(`onStageFused needs onStage or onStageStatements, which stage every other write`)
  }
  for (const route of plugin.inspectRoutes ?? []) {
    const needed = route.method === "GET" ? "inspect:read" : "inspect:write"
    if (!has(needed)) return invalid(`inspect route ${route.method} ${route.path} needs the permission "${needed}"`)
    if (Plugin.inspectPath(plugin.name, route.path) === undefined) {
      return invalid(`inspect route ${route.method} ${route.path}: an absolute inspect path must be /_fw/inspect/${plugin.name} or below it`)
    }
  }
  if (plugin.dashboardPanel && !has("inspect:read")) {
    return invalid(`a dashboard panel needs the permission "inspect:read"`)
  }
  for (const interceptor of plugin.interceptors ?? []) {
    const needed = `rpc:intercept:${interceptor.kind}` as const
    if (!has(needed)) return invalid(`a ${interceptor.kind} interceptor needs the permission "${needed}"`)
  }
  return Effect.void
}

/**
 * Starts a plugin's change listener and background layer, with its narrowed services, for the
 * lifetime of the scope.
 */
export const start = (plugin: Plugin.Plugin) =>
  Effect.gen(function*() {
    const narrowed = services(plugin, yield* Store, yield* HttpClient.HttpClient)
    // The layer's own scope, forked before the listener subscribes so that it closes after the
    // listener has drained: changes committed before shutdown are handled by a running plugin.
    const layerScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    // The listener's services merged into the caller's context, per event: the merge is kept for
    // the last context seen (a writer's context rarely changes between its writes).
    let parent: Context.Context<never> | undefined
    let merged: Context.Context<never> = narrowed as Context.Context<never>
    const withServices = <A, E>(effect: Effect.Effect<A, E, Plugin.Services>): Effect.Effect<A, E> =>
      Effect.locallyWith(effect as Effect.Effect<A, E>, FiberRef.currentContext, (context) => {
        if (context !== parent) {
          parent = context
          merged = Context.merge(context, narrowed as Context.Context<never>)
        }
        return merged
      })
    const onChangeEvent = plugin.onChangeEvent
    const onEventName = `fw.plugin ${plugin.name} onChangeEvent`
    const onEventAttributes = { "fw.plugin": plugin.name, "fw.hook": "onChangeEvent" }
    if (onChangeEvent !== undefined) {
      const recordFailure = plugin.recordChangeFailure
      const tap = yield* ChangeTap
      yield* tap.subscribe({
        name: plugin.name,
        onEvent: (event) => {
          const handled = onChangeEvent(event, narrowed)
          // Nothing to do for this event (a table the plugin ignores): no services to provide.
          return handled === Effect.void ? Effect.void : withServices(Telemetry.span(onEventName, onEventAttributes, event.provenance.traceId)(handled))
        },
        ...(plugin.inlineChangeEvents === true ? { inline: true } : {}),
        ...(recordFailure
          ? { durable: { recordFailure: (event, cause) => Effect.provide(recordFailure(event, cause), narrowed) } }
          : {})
      })
    }
    const statements = plugin.onStageStatements
    // Statements run through the plugin's store when a tier runs them as effects.
    const onStage = plugin.onStage !== undefined || statements === undefined
      ? plugin.onStage
      : (changes: ReadonlyArray<PendingChange>) => Effect.flatMap(Store, (store) => StageStatements.run(store, () => statements(changes)))
    const onStageSpan = Telemetry.span(`fw.plugin ${plugin.name} onStage`, { "fw.plugin": plugin.name, "fw.hook": "onStage" })
    const store = yield* Store
    if (onStage !== undefined && (plugin.onStageTiers === undefined || plugin.onStageTiers.includes(store.dialect))) {
      const tap = yield* ChangeTap
      yield* tap.addStager({
        name: plugin.name,
        stage: (changes) => Effect.provide(onStageSpan(onStage(changes)), narrowed),
        ...(statements === undefined ? {} : { statements }),
        // Fused parts run only without a tracer: no onStage span is lost.
        ...(plugin.onStageFused === undefined ? {} : { fuse: plugin.onStageFused })
      })
    }
    if (plugin.layer !== undefined) {
      yield* Layer.buildWithScope(plugin.layer.pipe(Layer.provide(Layer.succeedContext(narrowed))), layerScope).pipe(
        Effect.mapError((error) => new Plugin.PluginInvalid({ plugin: plugin.name, message: `failed to start: ${String(error)}` }))
      )
    }
  })
