/**
 * Request body caps. The platform applies no limit by default and its own limit resets the socket
 * instead of answering, so fw reads bodies itself: the counter stops the read at the cap, for
 * `Content-Length` and chunked bodies alike, and nothing past the cap is buffered.
 */
import type { HttpServerRequest } from "@effect/platform"
import { HttpServerResponse } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Cause, Effect, Either } from "effect"
import { BodyReadFailed, PayloadTooLarge } from "../app/BodyRead.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as Settings from "../app/Settings.js"
import * as EarlyBody from "./EarlyBody.js"
import type { IncomingMessage } from "node:http"
import type { Socket } from "node:net"

/** The default cap: 8 MiB. */
export const defaultMaxBodyBytes = 8 * 1024 * 1024

export { BodyReadFailed, PayloadTooLarge } from "../app/BodyRead.js"

/**
 * The app-wide cap: env `FW_MAX_BODY_BYTES` overrides the app's `http.maxBodyBytes`, which
 * overrides the 8 MiB default. Per-route caps override all three. An empty variable is unset; one
 * that is not a positive integer stops the boot (`SettingInvalid`).
 */
export const appMaxBodyBytes = (configured: number | undefined): Effect.Effect<number, Settings.SettingInvalid> =>
  Settings.positiveIntegerFromEnv("FW_MAX_BODY_BYTES", configured ?? defaultMaxBodyBytes)

const incomingOf = (request: HttpServerRequest.HttpServerRequest): IncomingMessage | undefined => {
  const source = NodeHttpServerRequest.toIncomingMessage(request) as unknown
  return typeof source === "object" && source !== null && "on" in source && "pause" in source
    ? source as IncomingMessage
    : undefined
}

/** How long a connection refused with 413 keeps discarding the upload before it is closed. */
export const lingerMillis = 5_000

/**
 * Refuses the rest of an upload without losing the answer. Node closes a `Connection: close`
 * socket as soon as the 413 is written; with upload data still arriving, the kernel then answers
 * with a reset (and an eager FIN makes a client still writing fail with EPIPE), either of which can
 * swallow the 413 before the client reads it. So the rest is discarded as it arrives (never
 * buffered), and the close lingers: the socket is destroyed once the client closes its side (it
 * has the complete 413 by then), or after `lingerMillis`.
 */
const discardRest = (incoming: IncomingMessage) => {
  incoming.resume()
  const socket: Socket | null = incoming.socket
  if (socket === null || socket.destroyed) return
  socket.destroySoon = function lingeringClose(this: Socket) {
    const timer = setTimeout(() => this.destroy(), lingerMillis)
    timer.unref()
    this.once("close", () => clearTimeout(timer))
    this.once("end", () => this.destroy())
  }
}

/** Reads the whole body, failing `PayloadTooLarge` as soon as it passes `limit` bytes. */
export const readCapped = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number
): Effect.Effect<Uint8Array, PayloadTooLarge | BodyReadFailed> => {
  const incoming = incomingOf(request)
  const declared = Number(request.headers["content-length"] ?? Number.NaN)
  if (Number.isFinite(declared) && declared > limit) {
    if (incoming !== undefined) discardRest(incoming)
    return Effect.fail(new PayloadTooLarge({ limit }))
  }
  // Collected before the route ran (`EarlyBody`): answered from that, at once.
  const early = incoming === undefined ? undefined : EarlyBody.take(incoming)
  if (early !== undefined) {
    switch (early._tag) {
      case "Body":
        return early.body.byteLength <= limit ? Effect.succeed(early.body) : Effect.fail(new PayloadTooLarge({ limit }))
      case "TooLarge":
        discardRest(incoming!)
        return Effect.fail(new PayloadTooLarge({ limit }))
      case "Failed":
        return Effect.fail(new BodyReadFailed({ message: early.message }))
    }
  }
  if (incoming === undefined) {
    // Not a Node request (a web handler in tests): the platform's own reader, which counts as it reads.
    return request.arrayBuffer.pipe(
      Effect.map((buffer) => new Uint8Array(buffer)),
      Effect.filterOrFail((body) => body.byteLength <= limit, () => new PayloadTooLarge({ limit })),
      Effect.catchTag("RequestError", (error) => Effect.fail(new BodyReadFailed({ message: error.message })))
    )
  }
  // The whole body has arrived and nobody has read from it (a small request's body comes in the
  // read that brought its headers): taken from the stream's buffer now, without a wait for its events.
  if (incoming.complete && incoming.readableFlowing === null && incoming.readableLength <= limit && !incoming.destroyed) {
    const buffered = incoming.read() as Buffer | null
    return Effect.succeed(buffered ?? new Uint8Array(0))
  }
  return Effect.async<Uint8Array, PayloadTooLarge | BodyReadFailed>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const cleanup = () => {
      incoming.off("data", onData)
      incoming.off("end", onEnd)
      incoming.off("error", onError)
      incoming.off("aborted", onAborted)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        cleanup()
        discardRest(incoming)
        chunks.length = 0
        resume(Effect.fail(new PayloadTooLarge({ limit })))
      } else {
        chunks.push(chunk)
      }
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)))
    }
    const onError = (error: Error) => {
      cleanup()
      resume(Effect.fail(new BodyReadFailed({ message: error.message })))
    }
    const onAborted = () => onError(new Error("client aborted the request"))
    incoming.on("data", onData)
    incoming.on("end", onEnd)
    incoming.on("error", onError)
    incoming.on("aborted", onAborted)
    return Effect.sync(cleanup)
  })
}

/** The 413 answer. `Connection: close` so Node does not drain the rest of the upload. */
export const payloadTooLargeResponse = (error: PayloadTooLarge): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(
    { _tag: "PayloadTooLarge", message: error.message, limit: error.limit },
    { status: 413, headers: { connection: "close" } }
  )

/**
 * A request whose body could not be read, answered: `PayloadTooLarge` 413, `BodyReadFailed` 400;
 * any other cause goes on. For a route's `catchAllCause` (`POST /rpc`, `POST /rpc/<tag>`).
 */
export const refusedResponse = (cause: Cause.Cause<unknown>): Effect.Effect<HttpServerResponse.HttpServerResponse, unknown> => {
  const failure = Cause.failureOrCause(cause)
  if (Either.isLeft(failure)) {
    const error = failure.left
    if (error instanceof PayloadTooLarge) return Effect.succeed(payloadTooLargeResponse(error))
    if (error instanceof BodyReadFailed) return Effect.succeed(HttpResponses.error(400, "BodyReadFailed", error.message))
  }
  return Effect.failCause(cause)
}
