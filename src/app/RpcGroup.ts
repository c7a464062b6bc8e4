/**
 * The app's procedures as an `@effect/rpc` group: one rpc per procedure, plus a streaming
 * `<tag>.live` rpc per query for live subscriptions over the socket.
 *
 * The server declares payloads as `Schema.Unknown` and decodes them itself, so a payload that
 * fails its schema is a typed `InputInvalid` (the rpc server would otherwise turn it into a defect).
 * Clients declare the real input schemas; both encode to the same JSON.
 */
import { Rpc, RpcGroup } from "@effect/rpc"
import { Schema } from "effect"
import { liveSuffix } from "./App.js"
import type { AreaErrorClass } from "./Errors.js"
import { wireError } from "./Errors.js"
import type * as Procedure from "./Procedure.js"

const rpcsOf = (procedures: Iterable<Procedure.Any>, side: "server" | "client", areaErrors: ReadonlyArray<AreaErrorClass>) => {
  const error = wireError(areaErrors)
  return [...procedures].flatMap((procedure) => {
    const payload = side === "server" ? Schema.Unknown : procedure.input
    const once = Rpc.make(procedure.tag, { payload, success: procedure.output, error })
    if (procedure.kind !== "query") return [once]
    const live = Rpc.make(`${procedure.tag}${liveSuffix}`, {
      payload,
      success: procedure.output,
      error,
      stream: true
    })
    return [once, live]
  })
}

/**
 * The rpc group of a set of procedures, failing with `ProcedureError` or one of `areaErrors` (the
 * app's `errors`; a client must name the same classes to decode them). Procedures are only known
 * at runtime, so the group's type is erased to `Rpc.Any`; `Client` restores types for callers.
 */
export const group = (
  procedures: Iterable<Procedure.Any>,
  side: "server" | "client",
  areaErrors: ReadonlyArray<AreaErrorClass> = []
) => RpcGroup.make(...rpcsOf(procedures, side, areaErrors))

/** The type of an app's rpc group. */
export type Group = ReturnType<typeof group>
