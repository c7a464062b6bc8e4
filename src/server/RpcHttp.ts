/**
 * `POST /rpc`: the rpc wire protocol (JSON serialization) answered directly by the procedure
 * runtime. A body holds one request message (or an array of them); the answer is the array of
 * their `Exit` messages, exactly as `@effect/rpc`'s HTTP protocol frames them, so `RpcClient`'s
 * HTTP transport talks to it unchanged. Live queries need a socket and are refused here.
 */
import { Headers } from "@effect/platform"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Option, Schema } from "effect"
import { liveSuffix } from "../app/App.js"
import type { WireError } from "../app/Errors.js"
import { ProcedureFailure, ProcedureNotFound, wireError } from "../app/Errors.js"
import * as HttpResponses from "../app/HttpResponses.js"
import type * as Procedure from "../app/Procedure.js"
import type { RuntimeShape } from "../app/Runtime.js"

const RequestMessage = Schema.Struct({
  _tag: Schema.Literal("Request"),
  id: Schema.String,
  tag: Schema.String,
  payload: Schema.Unknown,
  headers: Schema.optionalWith(Schema.Array(Schema.Tuple(Schema.String, Schema.String)), { default: () => [] })
})
// Decoded, not tested with `Schema.is`: `headers` is optional on the wire and defaults to none.
const decodeRequest = Schema.decodeUnknownOption(RequestMessage)

/** The encoded `Exit` of an output that failed its own schema (a defect of the handler). */
const outputDefect = { _tag: "Failure", cause: { _tag: "Die", defect: "the output failed its schema" } }

const defect = (message: string) => ({ _tag: "Defect", defect: { name: "RpcProtocolError", message } })

/**
 * A body that is not rpc messages: 400, its body still the rpc wire format (an array holding one
 * `Defect`), which `RpcClient`'s HTTP transport reads whatever the status.
 */
const malformed = (message: string) => HttpServerResponse.unsafeJson([defect(message)], { status: 400 })

/** The most messages one `POST /rpc` body may carry (a client batches the calls of one tick). */
export const maxMessagesPerBody = 1000
const batchConcurrency = 16
const decoder = new TextDecoder()

/** The `POST /rpc` handler over `runtime`, for a body already read within the cap. */
export const make = (runtime: RuntimeShape) => {
  const encodeError = Schema.encodeSync(wireError(runtime.app.errors))
  /** The encoded `Exit` of a failed call, as `Schema.Exit` encodes it. */
  const failureExit = (error: WireError) => ({ _tag: "Failure", cause: { _tag: "Fail", error: encodeError(error) } })
  const encoders = new Map<Procedure.Any, (output: unknown) => Effect.Effect<unknown, unknown>>()
  const encoderOf = (procedure: Procedure.Any) => {
    let encode = encoders.get(procedure)
    if (encode === undefined) {
      encode = Schema.encodeUnknown(procedure.output)
      encoders.set(procedure, encode)
    }
    return encode
  }

  const answer = (message: typeof RequestMessage.Type, transportHeaders: Headers.Headers) =>
    Effect.gen(function*() {
      const failWith = (error: WireError) => ({ _tag: "Exit", requestId: message.id, exit: failureExit(error) })
      if (message.tag.endsWith(liveSuffix) && runtime.app.procedures.has(message.tag.slice(0, -liveSuffix.length))) {
        return failWith(new ProcedureFailure({ status: 400, message: "live queries need the WebSocket transport" }))
      }
      const procedure = runtime.app.procedures.get(message.tag)
      if (procedure === undefined) return failWith(new ProcedureNotFound({ tag: message.tag }))
      // Message headers override transport headers, as on the socket.
      const headers = Headers.merge(transportHeaders, Headers.fromInput(message.headers))
      const result = yield* Effect.either(runtime.call(procedure, { input: message.payload, headers }))
      if (result._tag === "Left") return failWith(result.left)
      const exit = yield* encoderOf(procedure)(result.right).pipe(
        Effect.map((value) => ({ _tag: "Success", value })),
        Effect.orElseSucceed(() => outputDefect)
      )
      return { _tag: "Exit", requestId: message.id, exit }
    })

  return (body: Uint8Array) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      let parsed: unknown
      try {
        parsed = JSON.parse(decoder.decode(body))
      } catch (error) {
        return malformed(error instanceof Error ? error.message : "malformed JSON")
      }
      const raw = Array.isArray(parsed) ? parsed : [parsed]
      // One body is one client's batch: bounded, so a single request cannot occupy the server.
      if (raw.length > maxMessagesPerBody) {
        return HttpResponses.error(413, "BatchTooLarge", `at most ${maxMessagesPerBody} rpc messages per request`)
      }
      const messages: Array<typeof RequestMessage.Type> = []
      for (const message of raw) {
        const decoded = decodeRequest(message)
        // Checked before any call runs: a malformed batch runs none of its calls.
        if (Option.isNone(decoded)) return malformed("expected an rpc Request message (or an array of them)")
        messages.push(decoded.value)
      }
      // A single call (the common case) runs on the request's fiber: no child fiber per call.
      const answers = messages.length === 1
        ? [yield* answer(messages[0]!, request.headers)]
        : yield* Effect.forEach(messages, (message) => answer(message, request.headers), { concurrency: batchConcurrency })
      return HttpServerResponse.unsafeJson(answers)
    })
}
