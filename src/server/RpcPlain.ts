/**
 * `POST /rpc/<tag>`: a procedure called as plain JSON, as tRPC and the hosted backends take calls.
 * The body is the input (an empty body is `{}`), a success answers 200 with the encoded output, a
 * failure answers its status from the error table with the typed body (`{_tag, message}`, as on
 * every fw route). It is the same runtime call as the envelope on `POST /rpc` (caller, guards,
 * tenant scoping, trace id), behind the same cross-site screen and body cap; batches and live
 * queries stay with the envelope and the socket.
 *
 * ```sh
 * curl -X POST http://127.0.0.1:3000/rpc/notes.add -H 'content-type: application/json' \
 *   -H "cookie: fw:session=$SESSION" -d '{"text":"hello"}'
 * ```
 */
import { Headers, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Either, Option } from "effect"
import { liveSuffix } from "../app/App.js"
import * as CrossSite from "../app/CrossSite.js"
import { ProcedureNotFound } from "../app/Errors.js"
import * as HttpResponses from "../app/HttpResponses.js"
import type * as Procedure from "../app/Procedure.js"
import type { RuntimeShape } from "../app/Runtime.js"
import * as Answer from "../http/Answer.js"
import * as BodyLimit from "../http/BodyLimit.js"
import * as Provenance from "../kernel/changes/Provenance.js"

/** The path prefix of plain calls: `POST /rpc/<tag>`. */
export const pathPrefix = "/rpc/"

const decoder = new TextDecoder("utf-8", { fatal: true })

/** The input a body carries: JSON (or nothing, `{}`); Left is the 400 or 415 answer. */
const inputOf = (bytes: Uint8Array, contentType: string | undefined): Either.Either<unknown, HttpServerResponse.HttpServerResponse> => {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase()
  // Only JSON: a form post is what a cross-site page can send without asking.
  if (type !== "" && type !== "application/json" && !type.endsWith("+json")) {
    return Either.left(HttpResponses.error(415, "UnsupportedMediaType", `content type "${type}" is not accepted: send application/json`))
  }
  if (bytes.byteLength === 0) return Either.right({})
  try {
    return Either.right(JSON.parse(decoder.decode(bytes)))
  } catch {
    return Either.left(HttpResponses.error(400, "InputInvalid", "the request body is not valid JSON"))
  }
}

/** The `POST /rpc/<tag>` handler over `runtime`, reading bodies up to `maxBodyBytes`. */
export const make = (runtime: RuntimeShape, maxBodyBytes: number) => {
  const encoders = new Map<Procedure.Any, ReturnType<typeof Answer.encoder>>()
  const encoderOf = (procedure: Procedure.Any) => {
    let encode = encoders.get(procedure)
    if (encode === undefined) {
      encode = Answer.encoder(procedure.output, `POST ${pathPrefix}${procedure.tag}`)
      encoders.set(procedure, encode)
    }
    return encode
  }
  const call = (request: HttpServerRequest.HttpServerRequest) =>
    Effect.gen(function*() {
      const tag = decodeURIComponent(new URL(request.url, "http://fw").pathname.slice(pathPrefix.length))
      const procedure = runtime.app.procedures.get(tag)
      if (procedure === undefined) {
        const live = tag.endsWith(liveSuffix) && runtime.app.procedures.has(tag.slice(0, -liveSuffix.length))
        return live
          ? HttpResponses.error(400, "ProcedureFailure", "live queries need the WebSocket transport")
          : HttpResponses.procedureError(new ProcedureNotFound({ tag }))
      }
      const bytes = yield* BodyLimit.readCapped(request, maxBodyBytes)
      const input = inputOf(bytes, request.headers["content-type"])
      if (Either.isLeft(input)) return input.left
      const traceId = Provenance.traceIdOf(request.headers)
      const headers = Headers.set(request.headers, Provenance.traceHeader, traceId)
      const exit = yield* Effect.exit(runtime.call(procedure, { input: input.right, headers, traceId }))
      if (exit._tag === "Failure") {
        const failure = Cause.failureOption(exit.cause)
        return Option.isSome(failure) ? HttpResponses.procedureError(failure.value) : yield* Answer.failure(exit.cause, traceId, `POST ${pathPrefix}${tag}`)
      }
      const encoded = yield* encoderOf(procedure)(exit.value, traceId)
      return typeof encoded === "string" ? Answer.json(encoded, false, undefined) : encoded
    })
  return (request: HttpServerRequest.HttpServerRequest) =>
    Effect.catchAllCause(CrossSite.guardedRequest(runtime, request, call, { bodyExpected: true }), BodyLimit.refusedResponse)
}
