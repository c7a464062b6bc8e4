/**
 * `POST /rpc`: the rpc wire protocol (JSON serialization) answered directly by the procedure
 * runtime. A body holds one request message (or an array of them); the answer is the array of
 * their `Exit` messages, exactly as `@effect/rpc`'s HTTP protocol frames them, so `RpcClient`'s
 * HTTP transport talks to it unchanged. Live queries need a socket and are refused here.
 *
 * The route (`route`) has an eager twin (`DirectRoute`) whose body is read before it is called
 * (`EarlyBody`); it runs a single call on a fiber of its own started at once, so a call that
 * completes without waiting (a memory or SQLite read) is answered with no request fiber at all.
 */
import { Headers, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Either, Exit, Fiber, Option, Runtime, Schema } from "effect"
import { liveSuffix } from "../app/App.js"
import * as CrossSite from "../app/CrossSite.js"
import * as DirectRoute from "../app/DirectRoute.js"
import type { WireError } from "../app/Errors.js"
import { ProcedureFailure, ProcedureNotFound } from "../app/Errors.js"
import * as HttpResponses from "../app/HttpResponses.js"
import type * as Procedure from "../app/Procedure.js"
import type { RuntimeShape } from "../app/Runtime.js"
import * as BodyLimit from "../http/BodyLimit.js"
import * as EarlyBody from "../http/EarlyBody.js"
import * as Now from "../kernel/Now.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import * as RpcExit from "./RpcExit.js"
import * as RpcOutputDefect from "./RpcOutputDefect.js"

const RequestMessage = Schema.Struct({
  _tag: Schema.Literal("Request"),
  id: Schema.String,
  tag: Schema.String,
  payload: Schema.Unknown,
  headers: Schema.optionalWith(Schema.Array(Schema.Tuple(Schema.String, Schema.String)), { default: () => [] })
})
// Decoded, not tested with `Schema.is`: `headers` is optional on the wire and defaults to none.
const decodeRequestMessage = Schema.decodeUnknownOption(RequestMessage)

const isHeaderPairs = (value: unknown): value is ReadonlyArray<readonly [string, string]> => {
  if (!Array.isArray(value)) return false
  for (const entry of value) {
    if (!Array.isArray(entry) || entry.length !== 2 || typeof entry[0] !== "string" || typeof entry[1] !== "string") return false
  }
  return true
}

/**
 * A request message: the common well-formed one checked by hand (what the schema would accept,
 * with the same result), anything else decided by the schema.
 */
export const decodeRequest = (message: unknown): Option.Option<typeof RequestMessage.Type> => {
  if (typeof message === "object" && message !== null && !Array.isArray(message)) {
    const fields = message as Readonly<Record<string, unknown>>
    const headers = fields.headers
    if (
      fields._tag === "Request" && typeof fields.id === "string" && typeof fields.tag === "string" &&
      (headers === undefined || isHeaderPairs(headers))
    ) {
      return Option.some({ _tag: "Request", id: fields.id, tag: fields.tag, payload: fields.payload, headers: headers ?? [] })
    }
  }
  return decodeRequestMessage(message)
}

/**
 * A JSON answer, its body kept as the string `JSON.stringify` made (the headers are those of
 * `HttpServerResponse.unsafeJson`): Node sends a string body in one write together with the status
 * line and headers, where bytes take a second buffer in a `writev`, and the string is not encoded
 * to bytes first.
 */
const json = (value: unknown, status = 200): HttpServerResponse.HttpServerResponse => {
  const text = JSON.stringify(value)
  return HttpServerResponse.raw(text, { status, contentType: "application/json", contentLength: Buffer.byteLength(text) })
}

const defect = (message: string) => ({ _tag: "Defect", defect: { name: "RpcProtocolError", message } })

/**
 * A body that is not rpc messages: 400, its body still the rpc wire format (an array holding one
 * `Defect`), which `RpcClient`'s HTTP transport reads whatever the status.
 */
const malformed = (message: string) => json([defect(message)], 400)

/** The most messages one `POST /rpc` body may carry (a client batches the calls of one tick). */
export const maxMessagesPerBody = 1000
const batchConcurrency = 16
const decoder = new TextDecoder()

/** How a single call's effect is run: as it is (in the request's fiber), or started at once (`startNow`). */
type Start = <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E>

const inRequestFiber: Start = (effect) => effect

/**
 * Runs `effect` now on a fiber of `runtime`: its exit when it completes without waiting, else an
 * effect that waits for that fiber (and interrupts it when interrupted itself). The fiber is
 * started as `Runtime.runFork` starts one (it runs synchronously until it first waits) and polled:
 * `Runtime.runSyncExit` would add a synchronous scheduler to flush, and for a call that waits (a
 * database read) an `AsyncFiberException` error to make and unwrap.
 */
const startNow = (runtime: Runtime.Runtime<never>): Start => {
  const runFork = Runtime.runFork(runtime)
  return <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> => {
    const fiber = runFork(effect)
    // Marked (`Now.later`): the server can write the answer from the call fiber's end, without a request fiber.
    return fiber.unsafePoll() ?? Now.later(awaitCall(fiber), fiber, (exit) => exit as Exit.Exit<A, E>)
  }
}

/**
 * The exit of a call's fiber, awaited by the request's fiber (the call's fiber interrupted when the
 * request's is). Not `Fiber.join`: joining also merges the call fiber's references into the
 * request's (a diff of every fiber ref, ~5 % of a writing replica's CPU), and the request's fiber
 * reads none of them — it only encodes the exit and writes it, as for a call that answered at once.
 */
const awaitCall = <A, E>(fiber: Fiber.RuntimeFiber<A, E>): Effect.Effect<A, E> =>
  Effect.async<A, E>((resume) => {
    const done = fiber.unsafePoll()
    if (done !== null) return resume(done)
    fiber.addObserver(resume)
    return Effect.suspend(() => {
      fiber.removeObserver(resume)
      return Fiber.interrupt(fiber)
    })
  })

/** The `Exit` message answering request `requestId` with an encoded exit. */
const exitMessage = (requestId: string, exit: unknown) => ({ _tag: "Exit", requestId, exit })

/** The answer to a body holding one message (module-level: no closure per request). */
const single = (exit: unknown) => json([exit])
const many = (exits: ReadonlyArray<unknown>) => json(exits)

/**
 * The `POST /rpc` handler over `runtime`, for a body already read within the cap (from `request`).
 * `start` runs a body's single call (a batch runs in the request's fiber, `batchConcurrency` at a time).
 */
export const make = (runtime: RuntimeShape, start: Start = inRequestFiber) => {
  const exits = RpcExit.make(runtime)
  /**
   * The `Exit` message of a finished call: a success encoded, a failure with a wire error as the
   * failure's `Exit`; any other cause (a defect, an interruption) goes on as the answer's cause.
   * An output failing its schema is logged under the call's trace id and answered as a defect.
   */
  const finished = (requestId: string, procedure: Procedure.Any, traceId: string, exit: Exit.Exit<unknown, WireError>): Effect.Effect<unknown> => {
    if (exit._tag === "Success") {
      const encoded = exits.success(procedure, exit.value)
      // Encoded synchronously (the common case): the message made now, no continuation.
      if (Either.isRight(encoded)) return Exit.succeed(exitMessage(requestId, encoded.right))
      return exits.successLater(procedure)(exit.value).pipe(
        Effect.map((value) => ({ _tag: "Success", value })),
        Effect.catchAll((error) => RpcOutputDefect.answer(procedure.tag, traceId, error)),
        Effect.map((exit) => exitMessage(requestId, exit))
      )
    }
    const failure = Cause.failureOrCause(exit.cause)
    return Either.isLeft(failure) ? Exit.succeed(exitMessage(requestId, exits.failure(failure.left))) : Exit.failCause(failure.right)
  }

  const answer = (message: typeof RequestMessage.Type, transportHeaders: Headers.Headers, run: Start): Effect.Effect<unknown> => {
    if (message.tag.endsWith(liveSuffix) && runtime.app.procedures.has(message.tag.slice(0, -liveSuffix.length))) {
      const error = new ProcedureFailure({ status: 400, message: "live queries need the WebSocket transport" })
      return Effect.succeed(exitMessage(message.id, exits.failure(error)))
    }
    const procedure = runtime.app.procedures.get(message.tag)
    if (procedure === undefined) return Effect.succeed(exitMessage(message.id, exits.failure(new ProcedureNotFound({ tag: message.tag }))))
    // Message headers override transport headers, as on the socket.
    const headers = Headers.merge(transportHeaders, Headers.fromInput(message.headers))
    // Resolved here so that an output failing its schema is logged under the call's own trace id.
    const traceId = Provenance.traceIdOf(headers)
    const called = run(runtime.call(procedure, { input: message.payload, headers, ownsFiber: run !== inRequestFiber, traceId }))
    // A call that finished already (started at once, answered without waiting) is answered now.
    const exit = Now.exitOf(called)
    if (exit !== undefined) return finished(message.id, procedure, traceId, exit)
    // `Now`'s form, so that a call still running on its fiber (`startNow`) stays marked as such.
    return Now.matchCauseEffect(called, {
      onSuccess: (value) => finished(message.id, procedure, traceId, Exit.succeed(value)),
      onFailure: (cause) => finished(message.id, procedure, traceId, Exit.failCause(cause))
    })
  }

  return (request: HttpServerRequest.HttpServerRequest, body: Uint8Array): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    let parsed: unknown
    try {
      parsed = JSON.parse(decoder.decode(body))
    } catch (error) {
      return Effect.succeed(malformed(error instanceof Error ? error.message : "malformed JSON"))
    }
    if (!Array.isArray(parsed)) {
      // A single call (the common case) runs on the request's fiber: no child fiber per call.
      const decoded = decodeRequest(parsed)
      if (Option.isNone(decoded)) return Effect.succeed(malformed("expected an rpc Request message (or an array of them)"))
      return Now.map(answer(decoded.value, request.headers, start), single)
    }
    // One body is one client's batch: bounded, so a single request cannot occupy the server.
    if (parsed.length > maxMessagesPerBody) {
      return Effect.succeed(HttpResponses.error(413, "BatchTooLarge", `at most ${maxMessagesPerBody} rpc messages per request`))
    }
    const messages: Array<typeof RequestMessage.Type> = []
    for (const message of parsed) {
      const decoded = decodeRequest(message)
      // Checked before any call runs: a malformed batch runs none of its calls.
      if (Option.isNone(decoded)) return Effect.succeed(malformed("expected an rpc Request message (or an array of them)"))
      messages.push(decoded.value)
    }
    const answers = messages.length === 1
      ? Now.map(answer(messages[0]!, request.headers, start), (exit) => [exit])
      : Effect.forEach(messages, (message) => answer(message, request.headers, inRequestFiber), { concurrency: batchConcurrency })
    return Now.map(answers, many)
  }
}

const bodyExpected = { bodyExpected: true }

/**
 * The `POST /rpc` route handler, screened for cross-site use (`CrossSite`), its body read within
 * `maxBodyBytes`, with its eager twin: the twin's body is collected before it is called
 * (`EarlyBody`) and its single call started at once on a fiber with the services and fiber refs
 * where the route was built (as the WebSocket's calls are), so an answer given at once needs no
 * request fiber. The router's handler runs everything in the request's fiber, as before.
 */
export const route = (runtime: RuntimeShape, maxBodyBytes: number) =>
  Effect.map(Effect.runtime<never>(), (callRuntime) => {
    const respond = (answer: ReturnType<typeof make>) => {
      const read = (request: HttpServerRequest.HttpServerRequest) => {
        const body = BodyLimit.readCapped(request, maxBodyBytes)
        // A body collected before the route ran (`EarlyBody`) is answered now, with no continuation made.
        const collected = Now.exitOf(body)
        if (collected === undefined) return Effect.flatMap(body, (body) => answer(request, body))
        return collected._tag === "Success" ? answer(request, collected.value) : Exit.failCause(collected.cause)
      }
      return (request: HttpServerRequest.HttpServerRequest) =>
        Now.catchAllCause(CrossSite.guardedRequest(runtime, request, read, bodyExpected), BodyLimit.refusedResponse)
    }
    const routed = respond(make(runtime))
    const direct = respond(make(runtime, startNow(callRuntime)))
    return DirectRoute.withDirect(
      Effect.flatMap(HttpServerRequest.HttpServerRequest, routed),
      EarlyBody.wants((request: HttpServerRequest.HttpServerRequest) => direct(request), maxBodyBytes)
    )
  })
