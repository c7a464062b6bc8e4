/**
 * Wraps an rpc server protocol so a request naming an unknown procedure gets a typed
 * `ProcedureNotFound` failure for its request id (the rpc server would answer with an untyped defect).
 */
import { RpcServer } from "@effect/rpc"
import { Effect, Exit, Layer, Schema } from "effect"
import { ProcedureError, ProcedureNotFound } from "./Errors.js"

const encodeExit = Schema.encodeSync(Schema.Exit({ success: Schema.Unknown, failure: ProcedureError, defect: Schema.Defect }))

/** The protocol `protocol`, answering unknown tags itself. */
export const guard = (
  protocol: RpcServer.Protocol["Type"],
  knownTags: ReadonlySet<string>
): RpcServer.Protocol["Type"] => ({
  ...protocol,
  run: (handle) =>
    protocol.run((clientId, message) =>
      message._tag === "Request" && !knownTags.has(message.tag)
        ? protocol.send(clientId, {
          _tag: "Exit",
          requestId: message.id,
          exit: encodeExit(Exit.fail(new ProcedureNotFound({ tag: message.tag })))
        })
        : handle(clientId, message)
    )
})

/** A protocol layer wrapped with `guard`. */
export const layerGuarded = <E, R>(
  protocolLayer: Layer.Layer<RpcServer.Protocol, E, R>,
  knownTags: ReadonlySet<string>
): Layer.Layer<RpcServer.Protocol, E, R> =>
  Layer.effect(RpcServer.Protocol, Effect.map(RpcServer.Protocol, (protocol) => guard(protocol, knownTags))).pipe(
    Layer.provide(protocolLayer)
  )
