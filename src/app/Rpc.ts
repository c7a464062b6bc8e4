/**
 * The app's procedures as an `@effect/rpc` group: one rpc per procedure, plus a streaming
 * `<tag>.live` rpc per query for live subscriptions over the socket.
 *
 * The server declares payloads as `Schema.Unknown` and decodes them itself, so a payload that
 * fails its schema is a typed `InputInvalid` (the rpc server would otherwise turn it into a defect).
 * Clients declare the real input schemas; both encode to the same JSON.
 */
import type { Headers } from "@effect/platform"
import { Rpc, RpcGroup } from "@effect/rpc"
import type { Layer } from "effect"
import { Effect, Schema } from "effect"
import { liveSuffix } from "./App.js"
import { ProcedureError } from "./Errors.js"
import type * as Procedure from "./Procedure.js"
import { Runtime } from "./Runtime.js"

const rpcsOf = (procedures: Iterable<Procedure.Any>, side: "server" | "client") =>
  [...procedures].flatMap((procedure) => {
    const payload = side === "server" ? Schema.Unknown : procedure.input
    const once = Rpc.make(procedure.tag, { payload, success: procedure.output, error: ProcedureError })
    if (procedure.kind !== "query") return [once]
    const live = Rpc.make(`${procedure.tag}${liveSuffix}`, {
      payload,
      success: procedure.output,
      error: ProcedureError,
      stream: true
    })
    return [once, live]
  })

/**
 * The rpc group of a set of procedures. Procedures are only known at runtime, so the group's type
 * is erased to `Rpc.Any`; `Client` restores types for callers.
 */
export const group = (procedures: Iterable<Procedure.Any>, side: "server" | "client") =>
  RpcGroup.make(...rpcsOf(procedures, side))

/** The type of an app's rpc group. */
export type Group = ReturnType<typeof group>

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
