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
import { Chunk, Effect, Option, Schema, Stream } from "effect"
import type * as Errors from "../app/Errors.js"
import * as HttpResponses from "../app/HttpResponses.js"
import type * as Procedure from "../app/Procedure.js"
import type { RuntimeShape } from "../app/Runtime.js"
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
 * Answers a live query. `recheck` runs before every delta (extra scopes of the projection); its
 * failure ends the stream with an `error` event. Needs the request scope: the subscription is
 * released when it closes (the client disconnected, even during the first run).
 */
export const answer = (
  runtime: RuntimeShape,
  procedure: Procedure.Any,
  invocation: { readonly input: unknown; readonly headers: Headers.Headers },
  recheck: Effect.Effect<void, Errors.WireError>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, Scope.Scope> =>
  Effect.gen(function*() {
    const encode = Schema.encodeUnknownSync(procedure.output)
    const pull = yield* Stream.toPull(runtime.live(procedure, invocation))
    const first = yield* Effect.either(pull)
    if (first._tag === "Left") {
      return Option.match(first.left, {
        onNone: () => HttpResponses.error(500, "InternalError", "the live query ended before its first result"),
        onSome: HttpResponses.procedureError
      })
    }
    let sequence = 0
    let previous: unknown = undefined
    const frame = (result: unknown) => {
      const encoded = encode(result)
      sequence += 1
      const text = sequence === 1
        ? Sse.sseFrame("snapshot", { data: encoded }, String(sequence))
        : Sse.sseFrame("delta", delta(previous, encoded), String(sequence))
      previous = encoded
      return text
    }
    const rest = Stream.repeatEffectChunkOption(pull).pipe(
      Stream.mapEffect((result) => Effect.zipRight(recheck, Effect.sync(() => frame(result)))),
      Stream.catchAll((error) => Stream.succeed(errorFrame(error, String(sequence + 1))))
    )
    const frames = Stream.concat(Stream.fromIterable(Chunk.toReadonlyArray(first.right).map(frame)), rest)
    return Sse.response(frames)
  })
