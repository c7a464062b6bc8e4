/**
 * Server-sent events: `sse(emit => unsubscribe)` for hand-written routes, `sseFrame(event, data)`
 * for framing, and the response that streams them with a `retry:` hint and a keep-alive comment
 * every 15 seconds. The subscription is torn down when the client goes away.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect, Queue, Schedule, Stream } from "effect"

/** Emits one event. */
export type Emit = (event: string, data: unknown) => void

/** A route handler's SSE answer: `setup` subscribes and returns how to unsubscribe. */
export interface SseResponse {
  readonly _tag: "SseResponse"
  readonly setup: (emit: Emit, end: () => void) => (() => void) | Effect.Effect<() => void>
}

/** Answers with a stream of events. */
export const sse = (setup: SseResponse["setup"]): SseResponse => ({ _tag: "SseResponse", setup })

/** True for an SSE answer. */
export const isSse = (value: unknown): value is SseResponse =>
  typeof value === "object" && value !== null && "_tag" in value && value._tag === "SseResponse"

/** One event, framed: JSON data, embedded newlines split across `data:` lines. */
export const sseFrame = (event: string, data: unknown): string => {
  const text = typeof data === "string" ? data : JSON.stringify(data)
  return `event: ${event}\n${text.split(/\r?\n/).map((line) => `data: ${line}`).join("\n")}\n\n`
}

/** The reconnection hint sent first, in milliseconds. */
export const retryMs = 3_000

const encoder = new TextEncoder()

/** The streaming response of an SSE answer (subscribed for the lifetime of the request scope). */
export const response = (answer: SseResponse, headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const frames = yield* Queue.unbounded<string>()
    let ended = false
    const emit: Emit = (event, data) => {
      if (!ended) Queue.unsafeOffer(frames, sseFrame(event, data))
    }
    const end = () => {
      ended = true
      Queue.unsafeOffer(frames, "")
    }
    const setup = answer.setup(emit, end)
    const teardown = Effect.isEffect(setup) ? yield* setup : setup
    let subscribed = true
    const unsubscribe = () => {
      if (subscribed) teardown()
      subscribed = false
    }
    // The request scope closes when the client goes away, even before the body started streaming.
    yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))
    const events = Stream.fromQueue(frames).pipe(
      Stream.takeWhile((frame) => frame !== ""),
      Stream.merge(Stream.fromSchedule(Schedule.spaced("15 seconds")).pipe(Stream.as(": keep-alive\n\n")), {
        haltStrategy: "left"
      }),
      Stream.ensuring(Effect.sync(() => {
        ended = true
        unsubscribe()
      }))
    )
    return HttpServerResponse.stream(
      Stream.concat(Stream.succeed(`retry: ${retryMs}\n\n`), events).pipe(Stream.map((text) => encoder.encode(text))),
      {
        contentType: "text/event-stream",
        headers: { ...headers, "cache-control": "no-cache", "x-accel-buffering": "no", connection: "keep-alive" }
      }
    )
  })
