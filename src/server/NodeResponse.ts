/**
 * Writing an `HttpServerResponse` to a `node:http` response, for fw's Node adapter (`NodeServer`).
 *
 * A body held in memory (empty, bytes, a string) is written at once: status line, headers and body
 * leave in one `end` call (Node corks it into one write), and the request's fiber does not wait for
 * the socket's callback. Streamed bodies (SSE, byte streams, Node readables, form data) are written
 * as `@effect/platform-node` writes them: chunk by chunk with back-pressure, interruptible, a
 * failure mid-stream ending the response.
 */
import type { HttpServerRequest } from "@effect/platform"
import { Cookies, HttpServerError, type HttpServerResponse } from "@effect/platform"
import { Cause, Chunk, Effect, Stream } from "effect"
import type * as Http from "node:http"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as JsonResponse from "../http/JsonResponse.js"
import * as Sse from "../http/Sse.js"

/** The headers to send: the response's own, with its cookies as `set-cookie` lines. */
const headersOf = (response: HttpServerResponse.HttpServerResponse): Record<string, string | Array<string>> => {
  if (Cookies.isEmpty(response.cookies)) return response.headers
  const headers: Record<string, string | Array<string>> = { ...response.headers }
  const toSet = Cookies.toSetCookieHeaders(response.cookies)
  if (headers["set-cookie"] !== undefined) toSet.push(headers["set-cookie"] as string)
  headers["set-cookie"] = toSet
  return headers
}

const isReadable = (body: unknown): body is NodeJS.ReadableStream =>
  typeof body === "object" && body !== null && "pipe" in body && typeof body.pipe === "function"

/**
 * Writes `response` now when its body is in memory (or the method is HEAD). False when the body
 * streams: then `streamed` writes it.
 */
export const writeNow = (nodeResponse: Http.ServerResponse, method: string, response: HttpServerResponse.HttpServerResponse): boolean => {
  if (nodeResponse.writableEnded) return true
  if (JsonResponse.is(response)) {
    // The common JSON answer: its headers as the platform's response would have them, the text as is
    // (Node sends a string body with the head in one write; every header here is ASCII).
    nodeResponse.writeHead(response.status, response.wireHeaders())
    if (method === "HEAD" || response.status === 304) nodeResponse.end()
    else nodeResponse.end(response.text)
    return true
  }
  const body = response.body
  if (method === "HEAD" || body._tag === "Empty") {
    nodeResponse.writeHead(response.status, headersOf(response))
    nodeResponse.end()
    return true
  }
  if (body._tag === "Uint8Array" || (body._tag === "Raw" && !isReadable(body.body))) {
    nodeResponse.writeHead(response.status, headersOf(response))
    nodeResponse.end(body.body as Uint8Array | string)
    return true
  }
  return false
}

/** Ends a response whose streamed body failed: a 500 when nothing was sent yet, else just the end. */
const failedWhileStreaming = (nodeResponse: Http.ServerResponse, original: HttpServerResponse.HttpServerResponse) =>
<E>(originalCause: Cause.Cause<E>) =>
  Effect.flatMap(HttpServerError.causeResponse(originalCause), ([response, cause]) => {
    const headersSent = nodeResponse.headersSent
    if (!headersSent) nodeResponse.writeHead(response.status)
    if (!nodeResponse.writableEnded) nodeResponse.end()
    return Effect.failCause(headersSent ? Cause.sequential(originalCause, Cause.die(original)) : cause)
  })

/** Writes a response whose body streams (what `writeNow` declined), as the platform's Node server does. */
const streamed = (
  request: HttpServerRequest.HttpServerRequest,
  nodeResponse: Http.ServerResponse,
  response: HttpServerResponse.HttpServerResponse
): Effect.Effect<void, HttpServerError.ResponseError> => {
  const body = response.body
  const headers = headersOf(response)
  const failed = (cause: unknown) => new HttpServerError.ResponseError({ request, response, reason: "Decode", cause })
  switch (body._tag) {
    case "Raw": {
      nodeResponse.writeHead(response.status, headers)
      const source = body.body as NodeJS.ReadableStream
      return Effect.tryPromise({
        try: (signal) => pipeline(source, nodeResponse, { signal, end: true }),
        catch: failed
      }).pipe(Effect.interruptible, Effect.tapErrorCause(failedWhileStreaming(nodeResponse, response)))
    }
    case "FormData": {
      const web = new Response(body.formData)
      nodeResponse.writeHead(response.status, { ...headers, ...Object.fromEntries(web.headers) })
      return Effect.async<void, HttpServerError.ResponseError>((resume, signal) => {
        Readable.fromWeb(web.body as Parameters<typeof Readable.fromWeb>[0], { signal })
          .pipe(nodeResponse)
          .on("error", (cause) => resume(Effect.fail(failed(cause))))
          .once("finish", () => resume(Effect.void))
      }).pipe(Effect.interruptible, Effect.tapErrorCause(failedWhileStreaming(nodeResponse, response)))
    }
    case "Stream": {
      nodeResponse.writeHead(response.status, headers)
      const drained = Effect.unsafeMakeLatch()
      nodeResponse.on("drain", () => drained.unsafeOpen())
      const pulled = Sse.pullOf(body.stream)
      if (pulled !== undefined) {
        // An SSE body read frame by frame: a plain loop, no channel or chunk per frame, and frames the
        // source can make synchronously are written in the pass that made them, with no step of this
        // fiber (this runs per subscriber per push of a live query).
        let mustDrain = false
        nodeResponse.on("drain", () => {
          mustDrain = false
        })
        const write = (frame: Uint8Array) => {
          if (!nodeResponse.write(frame)) {
            mustDrain = true
            drained.unsafeClose()
          }
        }
        const written = Effect.scoped(Effect.flatMap(pulled, ({ listen, next }) => {
          listen({ ready: () => !mustDrain && !nodeResponse.writableEnded && !nodeResponse.destroyed, take: write })
          const writeThenLoop = (frame: Uint8Array) => {
            write(frame)
            return mustDrain ? Effect.zipRight(drained.await, loop) : loop
          }
          const loop: Effect.Effect<void> = Effect.flatMap(next, (frame) => {
            if (frame === undefined) return Effect.void
            // A synchronous write may have filled the socket while this fiber waited for the frame.
            return mustDrain ? Effect.zipRight(drained.await, Effect.suspend(() => writeThenLoop(frame))) : writeThenLoop(frame)
          })
          return loop
        }))
        return written.pipe(
          Effect.interruptible,
          Effect.matchCauseEffect({
            onSuccess: () => Effect.sync(() => nodeResponse.end()),
            onFailure: failedWhileStreaming(nodeResponse, response)
          })
        )
      }
      return body.stream.pipe(
        Stream.orDie,
        Stream.runForEachChunk((chunk) => {
          const parts = Chunk.toReadonlyArray(chunk)
          let mustDrain = false
          for (const part of parts) {
            if (!nodeResponse.write(part) && !mustDrain) {
              mustDrain = true
              drained.unsafeClose()
            }
          }
          return mustDrain ? drained.await : Effect.void
        }),
        Effect.interruptible,
        Effect.matchCauseEffect({
          onSuccess: () => Effect.sync(() => nodeResponse.end()),
          onFailure: failedWhileStreaming(nodeResponse, response)
        })
      )
    }
    default:
      return Effect.sync(() => {
        writeNow(nodeResponse, request.method, response)
      })
  }
}

/** Writes `response` for `request` to `nodeResponse`: at once when it can (`writeNow`), else streamed. */
export const write = (
  request: HttpServerRequest.HttpServerRequest,
  nodeResponse: Http.ServerResponse,
  response: HttpServerResponse.HttpServerResponse
): Effect.Effect<void, HttpServerError.ResponseError> =>
  Effect.suspend(() => writeNow(nodeResponse, request.method, response) ? Effect.void : streamed(request, nodeResponse, response))
