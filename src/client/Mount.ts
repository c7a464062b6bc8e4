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
import type { Schema } from "effect"
import type { AreaErrorClass } from "../app/Errors.js"
import type { ApiConfig, ApiOptions } from "./Api.js"
import { Api } from "./Api.js"

/**
 * What `mount` takes: the apis by name, and options shared by all of them (with `errors`, the
 * area error classes their procedures may fail with).
 */
export interface MountConfig<Names extends string, Errors extends ReadonlyArray<AreaErrorClass> = readonly []>
  extends ApiOptions
{
  readonly apis: { readonly [Name in Names]: ApiConfig }
  readonly errors?: Errors
}

/** A mounted client; `E` is the area errors it was given. */
export interface Mounted<Names extends string, E = never> {
  readonly apis: { readonly [Name in Names]: Api<E> }
  /** Closes every api's connection. */
  readonly dispose: () => void
}

/** Mounts the named apis. Nothing connects until a call or a live query needs it. */
export const mount = <const Names extends string, const Errors extends ReadonlyArray<AreaErrorClass> = readonly []>(
  config: MountConfig<Names, Errors>
): Mounted<Names, Schema.Schema.Type<Errors[number]>> => {
  const apis = Object.fromEntries(
    Object.entries<ApiConfig>(config.apis).map(([name, api]) => [name, new Api<Schema.Schema.Type<Errors[number]>>(api, config)])
  ) as { readonly [Name in Names]: Api<Schema.Schema.Type<Errors[number]>> }
  return {
    apis,
    dispose: () => {
      for (const api of Object.values<Api<Schema.Schema.Type<Errors[number]>>>(apis)) api.dispose()
    }
  }
}
