/**
 * Server-sent events. A hand-written route answers `sse(emit => unsubscribe)` and frames events
 * with `sseFrame(event, data)`; projected live queries use the same response builder. Every stream
 * starts with a `retry:` hint and carries a keep-alive comment every 15 seconds; it ends (and its
 * subscription is released) when the client disconnects.
 *
 * ```ts
 * handler: () => Effect.succeed(sse((emit) => {
 *   const timer = setInterval(() => emit(sseFrame("tick", { at: Date.now() })), 1000)
 *   return () => clearInterval(timer)
 * }))
 * ```
 */
import { HttpServerResponse } from "@effect/platform"
import type { Duration } from "effect"
import { Effect, Predicate, Schedule, Stream } from "effect"

/** Sends one framed event (a string made by `sseFrame`). */
export type Emit = (frame: string) => void

/** Starts a subscription; returns what stops it. */
export type Subscribe = (emit: Emit) => (() => void) | void

const TypeId: unique symbol = Symbol.for("@fw/framework/http/Sse")

/** An SSE answer of a handler. */
export interface Sse {
  readonly [TypeId]: typeof TypeId
  /** Framed events, in order; the stream's end closes the response. */
  readonly frames: Stream.Stream<string, unknown>
}

/** True for an `sse(...)` answer. */
export const isSse = (u: unknown): u is Sse => Predicate.hasProperty(u, TypeId)

/** The keep-alive comment interval (spec: 15 seconds). */
export const keepAliveInterval: Duration.DurationInput = "15 seconds"

/** The reconnection delay hinted to clients with `retry:`. */
export const retryMillis = 2_000

/** The comment line sent as keep-alive. */
export const keepAliveFrame = ": keep-alive\n\n"

const lineBreak = /\r\n|\r|\n/

/**
 * Frames one event: `id:` when given, `event:` (omitted for `message`), then the data split over one
 * `data:` line per line of text. Non-string data is sent as JSON. Throws on an event name or id
 * with a line break (it would end the frame early).
 */
export const sseFrame = (event: string, data: unknown, id?: string): string => {
  if (lineBreak.test(event) || (id !== undefined && (lineBreak.test(id) || id.includes("\0")))) {
    throw new Error("sseFrame: an event name or id may not contain line breaks")
  }
  const text = typeof data === "string" ? data : JSON.stringify(data) ?? "null"
  let frame = id === undefined ? "" : `id: ${id}\n`
  if (event !== "message") frame += `event: ${event}\n`
  for (const line of text.split(lineBreak)) frame += `data: ${line}\n`
  return frame + "\n"
}

/** The `retry:` hint frame. */
export const retryFrame = (millis: number = retryMillis): string => `retry: ${millis}\n\n`

const isStream = (source: Subscribe | Stream.Stream<string, unknown>): source is Stream.Stream<string, unknown> =>
  Predicate.hasProperty(source, Stream.StreamTypeId)

/**
 * An SSE answer from a subscribe function (called once the response starts; the function it
 * returns is called when the client disconnects or the stream ends) or from a stream of frames.
 */
export const sse = (source: Subscribe | Stream.Stream<string, unknown>): Sse => ({
  [TypeId]: TypeId,
  frames: isStream(source)
    ? source
    : Stream.asyncScoped<string>((emit) =>
      Effect.acquireRelease(
        Effect.sync(() => source((frame) => void emit.single(frame))),
        (stop) => Effect.sync(() => stop?.())
      )
    )
})

/** The response headers of every SSE answer. */
export const headers: Readonly<Record<string, string>> = {
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no"
}

const encoder = new TextEncoder()

/**
 * The body of an SSE response: the retry hint, then `frames` with a keep-alive comment every
 * `keepAlive` while the frames last.
 */
export const body = (
  frames: Stream.Stream<string>,
  keepAlive: Duration.DurationInput = keepAliveInterval
): Stream.Stream<Uint8Array> =>
  Stream.concat(Stream.succeed(retryFrame()), frames).pipe(
    Stream.merge(Stream.fromSchedule(Schedule.spaced(keepAlive)).pipe(Stream.as(keepAliveFrame)), {
      haltStrategy: "left"
    }),
    Stream.map((text) => encoder.encode(text))
  )

/** A `200 text/event-stream` response over `frames`. */
export const response = (frames: Stream.Stream<string>): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(body(frames), { contentType: "text/event-stream", headers })

/** The head of an SSE response without opening the stream (HEAD requests). */
export const head = (): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.empty({ status: 200, headers: { "content-type": "text/event-stream", ...headers } })
