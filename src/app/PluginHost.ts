/**
 * Hosting plugins: checks their declarations at boot and hands each one only what its
 * permissions allow (a read-only Store without `store:write`, an HttpClient limited to the
 * declared `network:outbound:<host>` hosts).
 */
import { FetchHttpClient, HttpClient, HttpClientError } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import { ChangeTap } from "../kernel/ChangeTap.js"
import { StoreWriteDenied } from "../kernel/Errors.js"
import type { StoreShape } from "../kernel/Store.js"
import { Store } from "../kernel/Store.js"
import * as Plugin from "./Plugin.js"

const outboundPrefix = "network:outbound:"

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
  for (const route of plugin.inspectRoutes ?? []) {
    const needed = route.method === "GET" ? "inspect:read" : "inspect:write"
    if (!has(needed)) return invalid(`inspect route ${route.method} ${route.path} needs the permission "${needed}"`)
  }
  for (const interceptor of plugin.interceptors ?? []) {
    const needed = `rpc:intercept:${interceptor.kind}` as const
    if (!has(needed)) return invalid(`a ${interceptor.kind} interceptor needs the permission "${needed}"`)
  }
  return Effect.void
}

/** The hosts a plugin declared with `network:outbound:<host>`. */
export const outboundHosts = (plugin: Plugin.Plugin): ReadonlySet<string> =>
  new Set(
    plugin.permissions.filter((p) => p.startsWith(outboundPrefix)).map((p) => p.slice(outboundPrefix.length))
  )

/** A store whose writes fail with `StoreWriteDenied` (reads, walks and transactions still work). */
export const readOnlyStore = (store: StoreShape, plugin: string): StoreShape => {
  const deny = (table: { readonly name: string }) => Effect.fail(new StoreWriteDenied({ table: table.name, plugin }))
  return {
    ...store,
    insert: deny,
    insertMany: deny,
    update: deny,
    upsert: deny,
    delete: deny
  }
}

/**
 * An HttpClient that refuses any host the plugin did not declare. The check runs at the moment of
 * sending, on the final URL (after any `mapRequest` the plugin adds), and redirects are not
 * followed: a declared host answering 302 cannot carry the request to an undeclared one.
 */
export const restrictedHttpClient = (
  client: HttpClient.HttpClient,
  plugin: string,
  hosts: ReadonlySet<string>
): HttpClient.HttpClient =>
  HttpClient.make((request, url) =>
    hosts.has(url.host) || hosts.has(url.hostname)
      ? client.execute(request).pipe(Effect.provideService(FetchHttpClient.RequestInit, { redirect: "manual" }))
      : Effect.fail(
        new HttpClientError.RequestError({
          request,
          reason: "Transport",
          description: `plugin "${plugin}" did not declare "${outboundPrefix}${url.hostname}"`
        })
      )
  )

/** The services a plugin's code runs with, narrowed to its permissions. */
export const services = (
  plugin: Plugin.Plugin,
  store: StoreShape,
  client: HttpClient.HttpClient
): Context.Context<Plugin.Services> =>
  Context.make(Store, plugin.permissions.includes("store:write") ? store : readOnlyStore(store, plugin.name)).pipe(
    Context.add(HttpClient.HttpClient, restrictedHttpClient(client, plugin.name, outboundHosts(plugin)))
  )

/**
 * Starts a plugin's change listener and background layer, with its narrowed services, for the
 * lifetime of the scope.
 */
export const start = (plugin: Plugin.Plugin) =>
  Effect.gen(function*() {
    const narrowed = services(plugin, yield* Store, yield* HttpClient.HttpClient)
    const onChangeEvent = plugin.onChangeEvent
    if (onChangeEvent !== undefined) {
      const recordFailure = plugin.recordChangeFailure
      const tap = yield* ChangeTap
      yield* tap.subscribe({
        name: plugin.name,
        onEvent: (event) => Effect.provide(onChangeEvent(event), narrowed),
        ...(recordFailure
          ? { durable: { recordFailure: (event, cause) => Effect.provide(recordFailure(event, cause), narrowed) } }
          : {})
      })
    }
    if (plugin.layer !== undefined) {
      yield* Layer.buildWithScope(plugin.layer.pipe(Layer.provide(Layer.succeedContext(narrowed))), yield* Effect.scope).pipe(
        Effect.mapError((error) => new Plugin.PluginInvalid({ plugin: plugin.name, message: `failed to start: ${String(error)}` }))
      )
    }
  })
