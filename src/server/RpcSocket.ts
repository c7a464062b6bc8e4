/**
 * The rpc WebSocket protocol of `GET /rpc`: `@effect/rpc`'s socket protocol (JSON frames, one
 * message per frame, the upgrade request's headers before each request's own), with the common
 * frames answered here instead of through the rpc server's mailbox and fibers:
 *
 * - a call of a procedure (not a live query) runs on one fiber started in the socket's message
 *   callback. A call that completes without waiting (a memory or SQLite read) has written its
 *   answer before the callback returns; one that waits (PostgreSQL) is tracked, so an `Interrupt`
 *   for it or the socket's close interrupts it as the rpc server would;
 * - a frame that is not JSON, a malformed message and an unknown tag get the answers the rpc
 *   protocol gives them (`RpcProtocol.guard`), written at once, so answers keep the frames' order;
 * - the answers written while one read's frames are handled leave in one socket write (the TCP
 *   socket is corked until the read is processed).
 * - what a socket holds unsent is bounded (`UnsentBound`): past the bound its frames are not read
 *   until the answers are sent, and a client whose answers keep piling up unread is dropped.
 *
 * Everything else (live subscriptions, acks, pings, end of input) goes to the rpc server as before,
 * and so does a call reusing the id of a request the rpc server still holds.
 */
import type { Headers as HeadersType } from "@effect/platform"
import { Headers, HttpServerRequest, HttpServerResponse, Socket } from "@effect/platform"
import { RpcSerialization, RpcServer } from "@effect/rpc"
import type { FromClientEncoded, FromServerEncoded } from "@effect/rpc/RpcMessage"
import { ResponseDefectEncoded } from "@effect/rpc/RpcMessage"
import type { Fiber } from "effect"
import { Cause, Effect, Either, Exit, FiberId, Mailbox, Option, Predicate, Runtime, Schema, Scope } from "effect"
import { liveSuffix } from "../app/App.js"
import { ProcedureNotFound } from "../app/Errors.js"
import type { RuntimeShape } from "../app/Runtime.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import * as RpcExit from "./RpcExit.js"
import * as RpcOutputDefect from "./RpcOutputDefect.js"
import * as RpcProtocol from "./RpcProtocol.js"
import * as UnsentBound from "./UnsentBound.js"

/** Encodes an interrupted call's `Exit` as the rpc server does (`Schema.Exit`; only the cause's interrupt is used). */
const encodeInterrupted = Schema.encodeSync(Schema.Exit({ success: Schema.Unknown, failure: Schema.Unknown, defect: Schema.Defect }))

/** A rpc request message (checked by `RpcProtocol.wellFormed`). */
interface Request {
  readonly _tag: "Request"
  readonly id: string
  readonly tag: string
  readonly payload: unknown
  readonly headers: ReadonlyArray<readonly [string, string]>
}

/** One open socket. */
interface Client {
  readonly id: number
  readonly write: (response: FromServerEncoded) => Effect.Effect<void>
  /** Calls answered here that are still running, by request id. */
  readonly calls: Map<string, Fiber.RuntimeFiber<void>>
  /** Requests waiting for the call running with their id, in arrival order. */
  readonly waiting: Map<string, Array<() => void>>
  /** Ids of requests handed to the rpc server, until their `Exit` is sent. */
  readonly forwarded: Set<string>
  /** The socket closed: nothing more is written. */
  closed: boolean
  /** The client sent `Eof`: from then on the rpc server decides about every message. */
  ended: boolean
}

/** The cork of a Node socket, if the upgrade request exposes one. */
interface Corkable {
  readonly cork: () => void
  readonly uncork: () => void
}

const corkableOf = (socket: unknown): Corkable | undefined =>
  typeof socket === "object" && socket !== null && typeof (socket as Partial<Corkable>).cork === "function" &&
    typeof (socket as Partial<Corkable>).uncork === "function"
    ? socket as Corkable
    : undefined

/** The `ws` library's socket object: what a synchronous send needs of it. */
interface WsSocket {
  readonly readyState: number
  readonly send: (data: string) => void
}

/**
 * The `ws` socket upgraded on `nodeSocket` (the `ws` library keeps it under its `websocket` symbol,
 * as `FrameCap` reads it), once it is there. The platform's writer sends through it too, but only
 * after waiting on its open latch, which suspends the writing fiber every time: a fiber resumed
 * through the scheduler per answer. If the shape ever changes, answers go through the writer.
 */
const wsOf = (nodeSocket: unknown): WsSocket | undefined => {
  if (typeof nodeSocket !== "object" || nodeSocket === null) return undefined
  const symbol = Object.getOwnPropertySymbols(nodeSocket).find((s) => s.description === "websocket")
  const ws = symbol === undefined ? undefined : (nodeSocket as Record<symbol, unknown>)[symbol]
  return typeof ws === "object" && ws !== null && typeof (ws as Partial<WsSocket>).send === "function" &&
      typeof (ws as Partial<WsSocket>).readyState === "number"
    ? ws as WsSocket
    : undefined
}

/** `WebSocket.OPEN`: the platform's writer sends only while its socket is open too. */
const wsOpen = 1

/**
 * The protocol (for `RpcServer.layer`) and the upgrade handler of `GET /rpc`, answering plain calls
 * through `runtime`. `knownTags` are the tags of the rpc group; `maxUnsentBytes` bounds what a
 * socket holds unsent (`UnsentBound`).
 */
export const make = (runtime: RuntimeShape, knownTags: ReadonlySet<string>, maxUnsentBytes: number) =>
  Effect.gen(function*() {
    const serialization = yield* RpcSerialization.RpcSerialization
    // Calls run with the services and fiber refs the rpc server's handlers get (where the server is built).
    const callRuntime = yield* Effect.runtime<never>()
    const runNow = Runtime.runSyncExit(callRuntime)
    const disconnects = yield* Mailbox.make<number>()
    const exits = RpcExit.make(runtime)
    const clients = new Map<number, Client>()
    const clientIds = new Set<number>()
    let nextClientId = 0
    let writeRequest: (clientId: number, message: FromClientEncoded) => Effect.Effect<void> = () => Effect.void

    /** Runs `effect` now; when it has to wait, returns the fiber that goes on with it. */
    const start = (effect: Effect.Effect<void>): Fiber.RuntimeFiber<void> | undefined => {
      const exit = runNow(effect)
      if (Exit.isSuccess(exit)) return undefined
      const defect = Cause.dieOption(exit.cause)
      return Option.isSome(defect) && Runtime.isAsyncFiberException(defect.value) ? defect.value.fiber as Fiber.RuntimeFiber<void> : undefined
    }

    /**
     * The encoded answer of a call, written unless the socket closed meanwhile (as the rpc server
     * sends only to a connected client). Uninterruptible, as the rpc server's: an interrupted call
     * is answered too.
     */
    const answer = (client: Client, request: Request, exit: unknown): Effect.Effect<void> =>
      Effect.suspend(() => client.closed ? Effect.void : client.write({ _tag: "Exit", requestId: request.id, exit } as FromServerEncoded))

    /** Runs a call of `request` (a procedure's, not a live query's) and writes its answer. */
    const call = (client: Client, request: Request, headers: HeadersType.Headers): void => {
      const procedure = runtime.app.procedures.get(request.tag)!
      // Resolved here so that an output failing its schema is logged under the call's own trace id.
      const traceId = Provenance.traceIdOf(headers)
      // The call's fiber is its own (`start`): after it, the fiber only writes the answer.
      const invocation = { input: request.payload, headers, ownsFiber: true, traceId }
      const effect = Effect.matchCauseEffect(Effect.interruptible(runtime.call(procedure, invocation)), {
        onSuccess: (output) => {
          const encoded = exits.success(procedure, output)
          if (Either.isRight(encoded)) return answer(client, request, encoded.right)
          return exits.successLater(procedure)(output).pipe(
            Effect.matchEffect({
              onSuccess: (value) => answer(client, request, { _tag: "Success", value }),
              // As `POST /rpc` answers it: the schema's details are logged, not sent.
              onFailure: (error) =>
                Effect.flatMap(RpcOutputDefect.answer(procedure.tag, traceId, error), (exit) => answer(client, request, exit))
            })
          )
        },
        onFailure: (cause) => {
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure)) return answer(client, request, exits.failure(failure.value))
          // Interrupted (the client's Interrupt, or the socket closed): answered as the rpc server does.
          return answer(client, request, encodeInterrupted(Exit.failCause(cause)))
        }
      })
      const fiber = start(Effect.uninterruptible(effect))
      if (fiber === undefined) return
      client.calls.set(request.id, fiber)
      fiber.addObserver(() => {
        if (client.calls.get(request.id) === fiber) client.calls.delete(request.id)
        startWaiting(client, request.id)
      })
    }

    /**
     * Starts the requests waiting for `id`, in arrival order, until one has to wait: one call per
     * id at a time, as the rpc server does. Nothing starts once the socket closed.
     */
    const startWaiting = (client: Client, id: string): void => {
      const queue = client.waiting.get(id)
      while (queue !== undefined && queue.length > 0 && !client.closed && !client.calls.has(id)) queue.shift()!()
      if (queue !== undefined && queue.length === 0) client.waiting.delete(id)
    }

    /** Handles one message here when it can; false hands it to the rpc server. */
    const handled = (client: Client, message: FromClientEncoded, upgradeHeaders: HeadersType.Headers): boolean => {
      if (client.ended) return false
      if (!RpcProtocol.wellFormed(message)) {
        start(client.write({ _tag: "Defect", defect: "malformed rpc message" }))
        return true
      }
      switch (message._tag) {
        case "Request": {
          if (!knownTags.has(message.tag)) {
            start(client.write({
              _tag: "Exit",
              requestId: message.id,
              exit: RpcProtocol.encodeExit(Exit.fail(new ProcedureNotFound({ tag: message.tag })))
            } as FromServerEncoded))
            return true
          }
          if (message.tag.endsWith(liveSuffix) || client.forwarded.has(message.id)) return false
          const request = message as unknown as Request
          // The request's own headers over the upgrade's (without any, the upgrade's as they are).
          const headers = request.headers.length === 0 ? upgradeHeaders : Headers.merge(upgradeHeaders, Headers.fromInput(request.headers))
          if (!client.calls.has(request.id)) {
            call(client, request, headers)
            return true
          }
          // The same id as a call still running: this one starts when that one (and any waiting before it) is done.
          const next = () => call(client, request, headers)
          const queue = client.waiting.get(request.id)
          if (queue === undefined) client.waiting.set(request.id, [next])
          else queue.push(next)
          return true
        }
        case "Interrupt": {
          const running = client.calls.get(message.requestId)
          if (running === undefined) return false
          running.unsafeInterruptAsFork(RpcServer.fiberIdClientInterrupt)
          return true
        }
        default:
          return false
      }
    }

    const onSocket = (
      socket: Socket.Socket,
      headers: ReadonlyArray<[string, string]>,
      nodeSocket: unknown
    ): Effect.Effect<void, never, Scope.Scope> =>
      Effect.gen(function*() {
        const scope = yield* Effect.scope
        const parser = serialization.unsafeMake()
        const id = nextClientId++
        const corkable = corkableOf(nodeSocket)
        const writeRaw = yield* socket.writer
        let ws: WsSocket | undefined
        let bound: UnsentBound.UnsentBound | undefined
        /** The TCP socket is corked while one read's frames are handled (see below). */
        let corked = false
        /**
         * Whether nothing more is written to the client: it closed, or it does not read its answers
         * (`UnsentBound`), and is dropped now: its calls interrupted, the reason logged. Not measured
         * while the socket is corked (what is written then is unsent until the read is processed,
         * also to a client that reads).
         */
        const silenced = (): boolean => {
          if (client.closed) return true
          if (ws === undefined) {
            ws = wsOf(nodeSocket)
            bound = UnsentBound.make(ws, nodeSocket, maxUnsentBytes)
          }
          if (corked || bound === undefined || !bound.dropped()) return false
          client.closed = true
          client.waiting.clear()
          for (const fiber of client.calls.values()) fiber.unsafeInterruptAsFork(FiberId.none)
          start(Effect.logWarning(UnsentBound.reasonOf(maxUnsentBytes)))
          return true
        }
        /** Writes `encoded` now through the open `ws` socket; false leaves it to the platform's writer. */
        const sendNow = (encoded: string | Uint8Array): boolean => {
          if (typeof encoded !== "string" || ws === undefined || ws.readyState !== wsOpen) return false
          ws.send(encoded)
          return true
        }
        const writeEncoded = (encoded: string | Uint8Array): Effect.Effect<void> => {
          if (silenced()) return Effect.void
          if (!sendNow(encoded)) return Effect.orDie(writeRaw(encoded))
          if (!corked) bound?.throttle()
          return Effect.void
        }
        /** Writes `response` when called (not when run): callers call it where the write belongs. */
        const write = (response: FromServerEncoded): Effect.Effect<void> => {
          let encoded: string | Uint8Array | undefined
          try {
            encoded = parser.encode(response)
          } catch (cause) {
            return writeEncoded(parser.encode(ResponseDefectEncoded(cause))!)
          }
          return encoded === undefined ? Effect.void : writeEncoded(encoded)
        }
        const client: Client = { id, write, calls: new Map(), waiting: new Map(), forwarded: new Set(), closed: false, ended: false }
        const upgradeHeaders = Headers.fromInput(headers)
        yield* Scope.addFinalizerExit(scope, () => {
          client.closed = true
          client.waiting.clear()
          for (const fiber of client.calls.values()) fiber.unsafeInterruptAsFork(FiberId.none)
          clientIds.delete(id)
          clients.delete(id)
          return disconnects.offer(id)
        })
        clientIds.add(id)
        clients.set(id, client)
        const uncork = () => {
          corked = false
          corkable!.uncork()
          bound?.throttle()
        }
        yield* socket.runRaw((data) => {
          // A client dropped for not reading: the frames still arriving before the close are ignored.
          if (silenced()) return
          let decoded: ReadonlyArray<unknown>
          try {
            decoded = parser.decode(data)
          } catch (cause) {
            if (Predicate.isTagged(cause, "RpcSerializationError")) {
              return writeRaw(new Socket.CloseEvent(1009, (cause as unknown as { readonly message: string }).message))
            }
            start(writeEncoded(parser.encode(ResponseDefectEncoded(cause))!))
            return
          }
          if (corkable !== undefined && !corked) {
            // Every answer written while this read's frames are handled leaves in one write.
            corked = true
            corkable.cork()
            process.nextTick(uncork)
          }
          let forward: Array<FromClientEncoded> | undefined
          for (const item of decoded) {
            const message = item as FromClientEncoded
            if (handled(client, message, upgradeHeaders)) continue
            // The rpc server reads the upgrade's headers before the request's own from the message.
            if (typeof item === "object" && item !== null && message._tag === "Request") {
              ;(message as { headers: ReadonlyArray<readonly [string, string]> }).headers = headers.concat(message.headers as Array<[string, string]>)
            }
            ;(forward ??= []).push(message)
          }
          if (forward === undefined) return
          const toServer = forward
          return Effect.forEach(toServer, (message) => {
            if (message._tag === "Request") client.forwarded.add(message.id)
            if (message._tag === "Eof") client.ended = true
            return writeRequest(id, message)
          }, { discard: true })
        }).pipe(
          Effect.interruptible,
          Effect.catchIf((error) => error.reason === "Close", () => Effect.void),
          Effect.orDie,
          Effect.withUnhandledErrorLogLevel(Option.none())
        )
      })

    const protocol = yield* RpcServer.Protocol.make((writeRequest_) => {
      writeRequest = writeRequest_
      return Effect.succeed({
        disconnects,
        send: (clientId: number, response: FromServerEncoded) => {
          const client = clients.get(clientId)
          if (client === undefined) return Effect.void
          if (response._tag === "Exit") client.forwarded.delete(response.requestId)
          return Effect.suspend(() => client.write(response))
        },
        end: () => Effect.void,
        clientIds: Effect.sync(() => clientIds),
        initialMessage: Effect.succeedNone,
        supportsAck: true,
        supportsTransferables: false,
        supportsSpanPropagation: true
      })
    })

    /** The upgrade handler: the socket's frames, until it closes. */
    const httpApp = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const socket = yield* Effect.orDie(request.upgrade)
      yield* onSocket(socket, Object.entries(request.headers), (request.source as { readonly socket?: unknown }).socket)
      return HttpServerResponse.empty()
    })
    return { protocol, httpApp }
  })
