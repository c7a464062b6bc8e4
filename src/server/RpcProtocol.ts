/**
 * Wraps an rpc server protocol so a request naming an unknown procedure gets a typed
 * `ProcedureNotFound` failure for its request id (the rpc server would answer with an untyped
 * defect), and a frame that is not a well-formed rpc message gets a `Defect` answer instead of
 * reaching the rpc server, which would throw on it and close the whole socket.
 */
import { RpcServer } from "@effect/rpc"
import { Effect, Exit, Layer, Schema } from "effect"
import { ProcedureError, ProcedureNotFound } from "../app/Errors.js"

/** Encodes a call's `Exit` with the framework's wire errors (the unknown-tag answer). */
export const encodeExit = Schema.encodeSync(Schema.Exit({ success: Schema.Unknown, failure: ProcedureError, defect: Schema.Defect }))

const isRequestId = (value: unknown): value is string => typeof value === "string" && /^\d{1,19}$/.test(value)

const isHeaders = (value: unknown): boolean =>
  Array.isArray(value) &&
  value.every((entry) => Array.isArray(entry) && entry.length === 2 && typeof entry[0] === "string" && typeof entry[1] === "string")

/** Whether a decoded frame has the shape the rpc server relies on. */
export const wellFormed = (message: unknown): boolean => {
  if (typeof message !== "object" || message === null) return false
  const fields = message as Readonly<Record<string, unknown>>
  switch (fields._tag) {
    case "Request":
      return isRequestId(fields.id) && typeof fields.tag === "string" && isHeaders(fields.headers)
    case "Ack":
    case "Interrupt":
      return isRequestId(fields.requestId)
    case "Ping":
    case "Eof":
      return true
    default:
      return false
  }
}

/** The protocol `protocol`, answering unknown tags and malformed frames itself. */
export const guard = (
  protocol: RpcServer.Protocol["Type"],
  knownTags: ReadonlySet<string>
): RpcServer.Protocol["Type"] => ({
  ...protocol,
  run: (handle) =>
    protocol.run((clientId, message) => {
      if (!wellFormed(message)) return protocol.send(clientId, { _tag: "Defect", defect: "malformed rpc message" })
      return message._tag === "Request" && !knownTags.has(message.tag)
        ? protocol.send(clientId, {
          _tag: "Exit",
          requestId: message.id,
          exit: encodeExit(Exit.fail(new ProcedureNotFound({ tag: message.tag })))
        })
        : handle(clientId, message)
    })
})

/** A protocol layer wrapped with `guard`. */
export const layerGuarded = <E, R>(
  protocolLayer: Layer.Layer<RpcServer.Protocol, E, R>,
  knownTags: ReadonlySet<string>
): Layer.Layer<RpcServer.Protocol, E, R> =>
  Layer.effect(RpcServer.Protocol, Effect.map(RpcServer.Protocol, (protocol) => guard(protocol, knownTags))).pipe(
    Layer.provide(protocolLayer)
  )
