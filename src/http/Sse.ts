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
import type { Clock, Scope } from "effect"
import { Channel, Chunk, Duration, Effect, Fiber, Option, Predicate, Queue, Stream } from "effect"

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

/** UTF-8 bytes of a frame. */
export const encode = (frame: string): Uint8Array => encoder.encode(frame)

const keepAliveBytes = encode(keepAliveFrame)
const retryBytes = encode(retryFrame())

/**
 * Where frames come from for `fromSource`. `next` answers the next frame, `null` when woken with no
 * frame (a keep-alive may be due), `undefined` when the stream ends; `nudge` wakes a pending
 * `next` (the shared keep-alive timer calls it).
 */
export interface Source {
  readonly next: Effect.Effect<Uint8Array | null | undefined>
  readonly nudge: () => void
  /**
   * Hands frames to `sink` synchronously while a `next` is pending and `sink.ready()`, when the
   * source can make them without running an effect (a live query's change that passes this
   * subscriber's checks at once); `next` keeps waiting then. Optional: without it every frame
   * comes through `next`.
   */
  readonly listen?: (sink: Sink) => void
}

/** A synchronous writer of frames (see `Source.listen`). */
export interface Sink {
  /** True when a frame taken now is written at once (the previous write went out). */
  readonly ready: () => boolean
  /** Writes one frame now. */
  readonly take: (frame: Uint8Array) => void
}

/** The streams that want a keep-alive on one clock and interval, and the one fiber that ticks for them all. */
interface Ticker {
  readonly streams: Set<() => void>
  fiber: Fiber.RuntimeFiber<never> | undefined
}

/**
 * One keep-alive timer per clock and interval, shared by every open stream (a timer per stream
 * costs a fiber and a timer each). Keyed by the clock so a test clock drives its own streams.
 */
const tickers = new WeakMap<Clock.Clock, Map<number, Ticker>>()

/**
 * Calls `tick` every `interval` while the scope is open, on the timer shared by all streams. The
 * first tick of a stream comes at most one interval after it registered (the timer does not
 * restart per stream).
 */
const keepAliveTicks = (interval: Duration.DurationInput, tick: () => void): Effect.Effect<void, never, Scope.Scope> => {
  const millis = Duration.toMillis(interval)
  return Effect.clockWith((clock) => {
    let byInterval = tickers.get(clock)
    if (byInterval === undefined) tickers.set(clock, byInterval = new Map())
    const intervals = byInterval
    return Effect.acquireRelease(
      Effect.suspend(() => {
        let ticker = intervals.get(millis)
        if (ticker === undefined) intervals.set(millis, ticker = { streams: new Set(), fiber: undefined })
        ticker.streams.add(tick)
        if (ticker.fiber !== undefined) return Effect.succeed(ticker)
        const running = ticker
        return Effect.sleep(millis).pipe(
          Effect.zipRight(Effect.sync(() => {
            for (const stream of running.streams) stream()
          })),
          Effect.forever,
          Effect.forkDaemon,
          Effect.map((fiber) => {
            running.fiber = fiber
            return running
          })
        )
      }),
      (ticker) =>
        Effect.suspend(() => {
          ticker.streams.delete(tick)
          if (ticker.streams.size > 0 || ticker.fiber === undefined) return Effect.void
          const fiber = ticker.fiber
          ticker.fiber = undefined
          intervals.delete(millis)
          return Fiber.interruptFork(fiber)
        })
    )
  })
}

/**
 * The frames of a pulled SSE body, one per step: each run of `next` answers the next bytes to
 * write, `undefined` at the end; `listen` lets a writer take frames synchronously in between (see
 * `Source.listen`).
 */
export interface Pull {
  readonly next: Effect.Effect<Uint8Array | undefined>
  readonly listen: (sink: Sink) => void
}

/** Opens a `Pull` in a scope (the keep-alive registration lives in it). */
export type OpenPull = Effect.Effect<Pull, never, Scope.Scope>

const PullTypeId: unique symbol = Symbol.for("@fw/framework/http/Sse/Pull")

/**
 * The step-by-step reading of a body made by `fromSource`, when `stream` is one (else `undefined`).
 * A writer that can write synchronously (fw's Node adapter) runs it as a plain loop instead of the
 * stream's channel: this runs per subscriber per push.
 */
export const pullOf = (stream: Stream.Stream<unknown, unknown, unknown>): OpenPull | undefined =>
  Predicate.hasProperty(stream, PullTypeId) ? stream[PullTypeId] as OpenPull : undefined

/**
 * The body of an SSE response pulled from `source`: the retry hint, then the source's frames, with
 * a keep-alive comment every `keepAlive` (on the shared timer) while it lasts. Each frame is pulled
 * when the previous one was written, so a slow client is asked for frames less often; a source
 * that keeps only its latest state (a live query) never queues for it. The stream can also be read
 * without its channel (`pullOf`).
 */
export const fromSource = (
  source: Source,
  keepAlive: Duration.DurationInput = keepAliveInterval
): Stream.Stream<Uint8Array> => {
  const open: OpenPull = Effect.gen(function*() {
    let started = false
    let due = false
    yield* keepAliveTicks(keepAlive, () => {
      due = true
      source.nudge()
    })
    const pull: Effect.Effect<Uint8Array | undefined> = Effect.suspend(() => {
      if (!started) {
        started = true
        return Effect.succeed(retryBytes)
      }
      if (due) {
        due = false
        return Effect.succeed(keepAliveBytes)
      }
      return Effect.flatMap(source.next, (frame) => frame === null ? pull : Effect.succeed(frame))
    })
    return { next: pull, listen: (sink: Sink) => source.listen?.(sink) }
  })
  const stream = Stream.unwrapScoped(Effect.map(open, ({ next: pull }) => {
    // One channel step per frame (no Option wrapping, no unwrap).
    const loop: Channel.Channel<Chunk.Chunk<Uint8Array>> = Channel.flatMap(
      Channel.fromEffect(pull),
      (frame) => frame === undefined ? Channel.void : Channel.flatMap(Channel.write(Chunk.of(frame)), () => loop)
    )
    return Stream.fromChannel(loop)
  }))
  return Object.assign(stream, { [PullTypeId]: open })
}

/**
 * The body of an SSE response: the retry hint, then `frames` with a keep-alive comment every
 * `keepAlive` while the frames last. The frames are run ahead of the socket by up to 16.
 */
export const body = (
  frames: Stream.Stream<string>,
  keepAlive: Duration.DurationInput = keepAliveInterval
): Stream.Stream<Uint8Array> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    // `null` is a wake-up: a keep-alive's turn, or the end of the frames.
    const queue = yield* Effect.acquireRelease(Queue.bounded<Uint8Array | null>(16), Queue.shutdown)
    let ended = false
    // A wake-up is dropped when the queue is full: the reader is not waiting then.
    const nudge = () => void queue.unsafeOffer(null)
    yield* frames.pipe(
      Stream.runForEach((frame) => Queue.offer(queue, encode(frame))),
      Effect.ensuring(Effect.sync(() => {
        ended = true
        nudge()
      })),
      Effect.forkScoped
    )
    const next = Effect.suspend(() =>
      ended && Option.getOrElse(queue.unsafeSize(), () => 0) === 0 ? Effect.succeed(undefined) : Queue.take(queue)
    )
    return fromSource({ next, nudge }, keepAlive)
  }))

/** A `200 text/event-stream` response over `frames`. */
export const response = (frames: Stream.Stream<string>): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(body(frames), { contentType: "text/event-stream", headers })

/** A `200 text/event-stream` response pulled from `source` (see `fromSource`). */
export const responseOf = (source: Source): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(fromSource(source), { contentType: "text/event-stream", headers })

/** The head of an SSE response without opening the stream (HEAD requests). */
export const head = (): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.empty({ status: 200, headers: { "content-type": "text/event-stream", ...headers } })
