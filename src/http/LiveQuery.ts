/**
 * A projected live query over SSE (spec 4.5 rule 5, 6.2): a `snapshot` event with the rows under
 * `data`, then a `delta` event per change that alters the caller's result, through the procedure
 * runtime's `live`, which re-resolves the caller and re-runs the guards and the row filter before
 * every push. A refusal before the stream starts is an ordinary error status; after it started it
 * is one `error` event, and the stream ends. A reconnect re-snapshots (`Last-Event-ID` is not
 * replayed).
 *
 * A delta carries the whole new result under `data`; when the result is a list of rows with ids it
 * also lists what changed: `inserted` and `updated` rows and `deleted` ids.
 */
import type { Headers } from "@effect/platform"
import { HttpServerResponse } from "@effect/platform"
import type { Scope } from "effect"
import { Effect, Either } from "effect"
import type * as Errors from "../app/Errors.js"
import * as HttpResponses from "../app/HttpResponses.js"
import type * as LiveGroups from "../app/LiveGroups.js"
import type * as Procedure from "../app/Procedure.js"
import type * as Runtime from "../app/Runtime.js"
import * as Sse from "./Sse.js"

type Keyed = ReadonlyArray<{ readonly id: string }>

const isKeyed = (value: unknown): value is Keyed =>
  Array.isArray(value) &&
  value.every((row) => typeof row === "object" && row !== null && typeof (row as { id?: unknown }).id === "string")

/** The data of a `delta` event, from the previous and the new encoded result. */
export const delta = (previous: unknown, next: unknown): Record<string, unknown> => {
  if (!isKeyed(previous) || !isKeyed(next)) return { data: next }
  const before = new Map(previous.map((row) => [row.id, JSON.stringify(row)]))
  const ids = new Set(next.map((row) => row.id))
  return {
    data: next,
    inserted: next.filter((row) => !before.has(row.id)),
    updated: next.filter((row) => before.has(row.id) && before.get(row.id) !== JSON.stringify(row)),
    deleted: previous.filter((row) => !ids.has(row.id)).map((row) => row.id)
  }
}

/** The `error` event: the refusal or failure, never internals. */
export const errorFrame = (error: Errors.WireError, id: string) =>
  Sse.sseFrame(
    "error",
    error._tag === "InternalError" && "traceId" in error
      ? { _tag: error._tag, message: error.message, traceId: error.traceId }
      : { _tag: error._tag, message: error.message },
    id
  )

/**
 * The `event: delta` and `data:` lines of a delta, per shared re-run and per previous result (by its
 * JSON): subscribers whose last push was the same result share the bytes; each adds its own `id:`.
 */
const deltaBodies = new WeakMap<LiveGroups.SharedRun, Map<string, Uint8Array>>()

/**
 * The whole frames made from a shared delta body, by `id:`: members that joined together number
 * their events alike, so they share the very bytes too.
 */
const framesById = new WeakMap<Uint8Array, Map<number, Uint8Array>>()

/** `id: <id>\n` followed by `body`, in one buffer (one write per subscriber). */
const withId = (id: number, body: Uint8Array): Uint8Array => {
  let byId = framesById.get(body)
  if (byId === undefined) framesById.set(body, byId = new Map())
  let frame = byId.get(id)
  if (frame === undefined) {
    const head = Sse.encode(`id: ${id}\n`)
    frame = new Uint8Array(head.length + body.length)
    frame.set(head)
    frame.set(body, head.length)
    byId.set(id, frame)
  }
  return frame
}

/** The delta frame of `next` after `previous`, its bytes shared with the other members of the re-run. */
const deltaFrame = (previous: Runtime.LiveValue, next: Runtime.LiveValue, id: number): Uint8Array => {
  if (next.shared === undefined) return Sse.encode(Sse.sseFrame("delta", delta(previous.encoded, next.encoded), String(id)))
  let byPrevious = deltaBodies.get(next.shared)
  if (byPrevious === undefined) deltaBodies.set(next.shared, byPrevious = new Map())
  let body = byPrevious.get(previous.json)
  if (body === undefined) {
    body = Sse.encode(Sse.sseFrame("delta", delta(previous.encoded, next.encoded)))
    byPrevious.set(previous.json, body)
  }
  return withId(id, body)
}

/**
 * Answers a live query. `recheck` runs before every delta (extra scopes of the projection); its
 * failure ends the stream with an `error` event. Needs the request scope: the subscription is
 * released when it closes (the client disconnected, even during the first run).
 */
export const answer = (
  runtime: Runtime.RuntimeShape,
  procedure: Procedure.Any,
  invocation: { readonly input: unknown; readonly headers: Headers.Headers },
  recheck: Effect.Effect<void, Errors.WireError>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, Scope.Scope> =>
  Effect.gen(function*() {
    const subscribed = yield* Effect.either(runtime.subscribe(procedure, invocation))
    if (Either.isLeft(subscribed)) return HttpResponses.procedureError(subscribed.left)
    const { first, listen, nudge, poll } = subscribed.right
    let sequence = 1
    let previous = first
    let snapshot: Uint8Array | undefined = Sse.encode(Sse.sseFrame("snapshot", { data: first.encoded }, "1"))
    let ended = false
    const frameOf = (value: Runtime.LiveValue) => {
      sequence += 1
      const frame = deltaFrame(previous, value, sequence)
      previous = value
      return frame
    }
    const push = (value: Runtime.LiveValue | undefined) => value === undefined ? null : frameOf(value)
    const next: Effect.Effect<Uint8Array | null | undefined> = Effect.suspend(() => {
      if (snapshot !== undefined) {
        const frame = snapshot
        snapshot = undefined
        return Effect.succeed(frame)
      }
      if (ended) return Effect.succeed(undefined)
      const pushed = Effect.flatMap(poll, (value) => value === undefined ? Effect.succeed(null) : Effect.as(recheck, push(value)))
      return Effect.catchAll(pushed, (error) => {
        ended = true
        return Effect.succeed(Sse.encode(errorFrame(error, String(sequence + 1))))
      })
    })
    // Without extra scopes to re-check, a change that passes the subscriber's checks at once is
    // framed and written in the pass that announced it (`Sse.Source.listen`).
    const listenSync = recheck === Effect.void
      ? (sink: Sse.Sink) => listen({ ready: sink.ready, take: (value) => sink.take(frameOf(value)) })
      : undefined
    return Sse.responseOf(listenSync === undefined ? { next, nudge } : { next, nudge, listen: listenSync })
  })
