/**
 * The app's body cap applied to WebSocket frames. The platform's WebSocket server (the `ws`
 * library) accepts messages up to 100 MiB, while every HTTP body is capped at `http.maxBodyBytes`
 * (8 MiB by default): a client could make the server buffer a dozen times more through the socket.
 * A message over the cap closes the socket with code 1009 ("message too big", RFC 6455 §7.4.1).
 *
 * Two layers: once the socket is open, the `ws` receiver's own limit is lowered to the cap, so an
 * oversized frame is refused from its header before its payload is read (this reaches into the
 * `ws` object the platform does not expose; if its shape ever changes, this step does nothing);
 * and every message handed to the app is measured, so a message that reached the app anyway (or
 * arrived before the socket was open) is refused the same way.
 */
import type { HttpServerRequest } from "@effect/platform"
import { Socket } from "@effect/platform"
import { Effect } from "effect"

/** The close code of an oversized message. */
export const tooBigCode = 1009

const sizeOf = (data: string | Uint8Array): number => typeof data === "string" ? Buffer.byteLength(data) : data.byteLength

/** Lowers the `ws` receiver's limit of the socket upgraded on `nodeSocket` (see above), if it can be found. */
const lowerReceiverLimit = (nodeSocket: unknown, cap: number): void => {
  if (typeof nodeSocket !== "object" || nodeSocket === null) return
  const symbol = Object.getOwnPropertySymbols(nodeSocket).find((s) => s.description === "websocket")
  if (symbol === undefined) return
  const ws = (nodeSocket as Record<symbol, unknown>)[symbol]
  const receiver = typeof ws === "object" && ws !== null ? (ws as { _receiver?: unknown })._receiver : undefined
  if (typeof receiver === "object" && receiver !== null && typeof (receiver as { _maxPayload?: unknown })._maxPayload === "number") {
    ;(receiver as { _maxPayload: number })._maxPayload = cap
  }
}

/** `socket` refusing messages over `cap` bytes with a 1009 close. */
const cappedSocket = (socket: Socket.Socket, cap: number, nodeSocket: unknown): Socket.Socket => {
  const refuse = Effect.scoped(Effect.flatMap(
    socket.writer,
    (write) => write(new Socket.CloseEvent(tooBigCode, `message over the ${cap}-byte cap`))
  )).pipe(Effect.ignore)
  const opened = (onOpen: Effect.Effect<void> | undefined) =>
    Effect.zipRight(Effect.sync(() => lowerReceiverLimit(nodeSocket, cap)), onOpen ?? Effect.void)
  const runRaw: Socket.Socket["runRaw"] = <_, E, R>(
    handler: (_: string | Uint8Array) => Effect.Effect<_, E, R> | void,
    options?: { readonly onOpen?: Effect.Effect<void> | undefined }
  ) =>
    socket.runRaw<_ | void, E, R>((data) => sizeOf(data) > cap ? refuse : handler(data), { onOpen: opened(options?.onOpen) })
  const run: Socket.Socket["run"] = <_, E, R>(
    handler: (_: Uint8Array) => Effect.Effect<_, E, R> | void,
    options?: { readonly onOpen?: Effect.Effect<void> | undefined }
  ) =>
    socket.run<_ | void, E, R>((data) => data.byteLength > cap ? refuse : handler(data), { onOpen: opened(options?.onOpen) })
  return { [Socket.TypeId]: Socket.TypeId, run, runRaw, writer: socket.writer }
}

/** `request` whose WebSocket upgrade refuses messages over `cap` bytes. */
export const capped = (request: HttpServerRequest.HttpServerRequest, cap: number): HttpServerRequest.HttpServerRequest => {
  const source = request.source as { readonly socket?: unknown }
  const nodeSocket = source.socket
  // Every other member is the request's own (read through the prototype chain).
  const view: HttpServerRequest.HttpServerRequest = Object.create(request)
  Object.defineProperty(view, "upgrade", {
    get: () => Effect.map(request.upgrade, (socket) => cappedSocket(socket, cap, nodeSocket))
  })
  return view
}
