/**
 * The handlers of the app's rpc group: each rpc delegates to the procedure runtime (a query's
 * `<tag>.live` rpc to its live subscription).
 */
import type { Headers } from "@effect/platform"
import type { Rpc, RpcGroup } from "@effect/rpc"
import type { Layer } from "effect"
import { Effect } from "effect"
import { liveSuffix } from "../app/App.js"
import type { Group } from "../app/RpcGroup.js"
import { Runtime } from "../app/Runtime.js"

type AnyHandler = (payload: unknown, options: { readonly headers: Headers.Headers }) => unknown

/** Handlers of every rpc of the server group, each delegating to the runtime. */
export const handlersLayer = (serverGroup: Group): Layer.Layer<Rpc.ToHandler<Group extends RpcGroup.RpcGroup<infer R> ? R : never>, never, Runtime> =>
  serverGroup.toLayer(Effect.gen(function*() {
    const runtime = yield* Runtime
    const handlers: Record<string, AnyHandler> = {}
    for (const procedure of runtime.app.procedures.values()) {
      handlers[procedure.tag] = (input, { headers }) => runtime.call(procedure, { input, headers })
      if (procedure.kind === "query") {
        handlers[`${procedure.tag}${liveSuffix}`] = (input, { headers }) => runtime.live(procedure, { input, headers })
      }
    }
    // The builder boundary: handler types are checked per procedure by the runtime, not by the rpc group type.
    return handlers as never
  }))
