/**
 * What a plugin's code runs with, narrowed to its permissions: a read-only Store without
 * `store:write`, an HttpClient limited to the declared `network:outbound:<host>` hosts. The
 * procedure runtime hands these to plugin procedures; the server hands them to plugin layers,
 * listeners and routes.
 */
import { FetchHttpClient, HttpClient, HttpClientError } from "@effect/platform"
import { Context, Effect } from "effect"
import { StoreWriteDenied } from "../kernel/Errors.js"
import type { StoreShape } from "../kernel/store/Store.js"
import { Store } from "../kernel/store/Store.js"
import type * as Plugin from "./Plugin.js"

/** The prefix of the permissions that declare an outbound host. */
export const outboundPrefix = "network:outbound:"

/** The hosts a plugin declared with `network:outbound:<host>`. */
export const outboundHosts = (plugin: Plugin.Plugin): ReadonlySet<string> =>
  new Set(
    plugin.permissions.filter((p) => p.startsWith(outboundPrefix)).map((p) => p.slice(outboundPrefix.length))
  )

/**
 * A store whose writes fail with `StoreWriteDenied` (reads, walks and transactions still work),
 * `purge` of the framework's own tables included: a plugin's without `store:write`, or one given
 * to a request that may only read (`{reason}`).
 */
export const readOnlyStore = (store: StoreShape, who: string | { readonly reason: string }): StoreShape => {
  const denied = typeof who === "string" ? { plugin: who } : who
  const deny = (table: { readonly name: string }) => Effect.fail(new StoreWriteDenied({ table: table.name, ...denied }))
  return {
    ...store,
    insert: deny,
    insertMany: deny,
    update: deny,
    upsert: deny,
    delete: deny,
    purge: deny
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

