/**
 * An EventSource-compatible reader for tests: the response body is fed to the
 * `@effect/experimental/Sse` parser; events arrive on a queue, and `closed` completes when the
 * server ends the stream. Aborted (the client disconnects) when the scope closes.
 */
import * as Sse from "@effect/experimental/Sse"
import type { Scope } from "effect"
import { Deferred, Effect, Queue } from "effect"

/** An open event stream. */
export interface Connection {
  readonly status: number
  readonly headers: Headers
  /** The next event (`retry:` hints are dropped, comments never reach the parser's events). */
  readonly next: Effect.Effect<Sse.Event>
  /** Completes when the server ended the response. */
  readonly closed: Deferred.Deferred<void>
  /** Every byte received so far, as text (for framing checks). */
  readonly raw: () => string
  /** Disconnects now. */
  readonly abort: Effect.Effect<void>
}

/** Opens `url` as an event stream. */
export const open = (url: string, headers: Record<string, string> = {}): Effect.Effect<Connection, never, Scope.Scope> =>
  Effect.gen(function*() {
    const events = yield* Queue.unbounded<Sse.Event>()
    const closed = yield* Deferred.make<void>()
    const controller = new AbortController()
    const abort = Effect.sync(() => controller.abort())
    yield* Effect.addFinalizer(() => abort)
    const response = yield* Effect.promise(() =>
      fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: controller.signal })
    )
    let raw = ""
    const parser = Sse.makeParser((event) => {
      if (event._tag === "Event") Queue.unsafeOffer(events, event)
    })
    if (response.body !== null) {
      const reader = response.body.getReader()
      const decoder = new TextDecoder()
      const pump = async () => {
        try {
          for (let read = await reader.read(); !read.done; read = await reader.read()) {
            const text = decoder.decode(read.value, { stream: true })
            raw += text
            parser.feed(text)
          }
        } catch {
          // Aborted by the test.
        }
        Deferred.unsafeDone(closed, Effect.void)
      }
      void pump()
    } else {
      Deferred.unsafeDone(closed, Effect.void)
    }
    return { status: response.status, headers: response.headers, next: Queue.take(events), closed, raw: () => raw, abort }
  })
