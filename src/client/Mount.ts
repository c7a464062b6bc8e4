/**
 * `mount({apis})`: the browser entry of fw. Each named api is one WebSocket to an app's `/rpc`,
 * connected on first use.
 *
 * ```ts
 * const fw = mount({
 *   apis: {
 *     main: { url: "/rpc", authHeaders: async () => ({ authorization: `Bearer ${await token()}` }) }
 *   }
 * })
 * const todo = await fw.apis.main.call(addTodo, { text: "milk" })
 * const todos = fw.apis.main.live(listTodos, {}) // { getSnapshot, subscribe }
 * ```
 */
import type { ApiConfig, ApiOptions } from "./Api.js"
import { Api } from "./Api.js"

/** What `mount` takes: the apis by name, and options shared by all of them. */
export interface MountConfig<Names extends string> extends ApiOptions {
  readonly apis: { readonly [Name in Names]: ApiConfig }
}

/** A mounted client. */
export interface Mounted<Names extends string> {
  readonly apis: { readonly [Name in Names]: Api }
  /** Closes every api's connection. */
  readonly dispose: () => void
}

/** Mounts the named apis. Nothing connects until a call or a live query needs it. */
export const mount = <const Names extends string>(config: MountConfig<Names>): Mounted<Names> => {
  const apis = Object.fromEntries(
    Object.entries<ApiConfig>(config.apis).map(([name, api]) => [name, new Api(api, config)])
  ) as { readonly [Name in Names]: Api }
  return {
    apis,
    dispose: () => {
      for (const api of Object.values<Api>(apis)) api.dispose()
    }
  }
}
