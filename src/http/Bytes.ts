/**
 * Binary downloads: `bytes(stream, {contentType, contentLength, contentDisposition})` pipes the
 * stream to the client chunk by chunk (never buffered, never compressed), after the method gate,
 * sunset, decode and guards ran like for any route.
 */
import { HttpServerResponse } from "@effect/platform"
import type { Stream } from "effect"

/** Options of a download. */
export interface Options {
  readonly contentType: string
  readonly contentLength?: number
  readonly contentDisposition?: string
}

/** A route handler's binary answer. */
export interface BytesResponse {
  readonly _tag: "BytesResponse"
  readonly stream: Stream.Stream<Uint8Array, unknown> | (() => Stream.Stream<Uint8Array, unknown>)
  readonly options: Options
}

/** Answers with a byte stream (or a thunk making it, so nothing opens before the guards passed). */
export const bytes = (stream: BytesResponse["stream"], options: Options): BytesResponse => ({
  _tag: "BytesResponse",
  stream,
  options
})

/** True for a binary answer. */
export const isBytes = (value: unknown): value is BytesResponse =>
  typeof value === "object" && value !== null && "_tag" in value && value._tag === "BytesResponse"

/** The streaming response of a binary answer. */
export const response = (answer: BytesResponse, headers: Record<string, string> = {}) =>
  HttpServerResponse.stream(typeof answer.stream === "function" ? answer.stream() : answer.stream, {
    contentType: answer.options.contentType,
    ...(answer.options.contentLength === undefined ? {} : { contentLength: answer.options.contentLength }),
    headers: {
      ...headers,
      ...(answer.options.contentDisposition === undefined ? {} : { "content-disposition": answer.options.contentDisposition }),
      "cache-control": "no-transform"
    }
  })
