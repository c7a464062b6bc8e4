/**
 * Binary answers: `bytes(source, {contentType, contentLength, contentDisposition})`, the one shape
 * a REST handler and a plugin HTTP route (spec 4.5 rule 6, `PluginHttpRouteResult.byteStream`)
 * return a byte stream in. The body is piped chunk by chunk (the Node adapter waits for `drain`),
 * never buffered whole and never compressed. A thunk source is opened only when the body is sent,
 * after everything that may refuse the request (REST: method gate, sunset gate, decode and guards;
 * plugin routes: the caller's credential, the cross-site screen, the inspect gate), and not at all
 * for `HEAD`.
 *
 * ```ts
 * handler: ({ params }) => Effect.succeed(bytes(() => createReadStream(fileOf(params.id)), {
 *   contentType: "application/pdf", contentDisposition: `attachment; filename="report.pdf"`
 * }))
 * ```
 */
import { HttpServerResponse } from "@effect/platform"
import { NodeStream } from "@effect/platform-node"
import { Predicate, Stream } from "effect"
import { Readable } from "node:stream"

/** Reading the binary source failed mid-response (the response is cut short). */
export class BytesSourceFailed extends Error {
  override readonly name = "BytesSourceFailed"
}

/** What a binary body may come from. */
export type Source =
  | Stream.Stream<Uint8Array, unknown>
  | Readable
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array>

/** Response metadata of a binary answer. */
export interface Options {
  readonly contentType?: string
  readonly contentLength?: number
  readonly contentDisposition?: string
}

const TypeId: unique symbol = Symbol.for("@fw/framework/http/Bytes")

/** A binary answer of a handler. */
export interface Bytes {
  readonly [TypeId]: typeof TypeId
  readonly open: () => Source
  readonly options: Options
}

/** True for a `bytes(...)` answer. */
export const isBytes = (u: unknown): u is Bytes => Predicate.hasProperty(u, TypeId)

/** A binary answer; pass a thunk to open the source only when the body is actually sent. */
export const bytes = (source: Source | (() => Source), options: Options = {}): Bytes => ({
  [TypeId]: TypeId,
  open: typeof source === "function" ? source : () => source,
  options
})

const isStream = (source: Source): source is Stream.Stream<Uint8Array, unknown> =>
  Predicate.hasProperty(source, Stream.StreamTypeId)

const isWebStream = (source: Source): source is ReadableStream<Uint8Array> =>
  typeof (source as { readonly getReader?: unknown }).getReader === "function"

const toStream = (source: Source): Stream.Stream<Uint8Array, unknown> => {
  if (isStream(source)) return source
  if (source instanceof Readable) {
    return NodeStream.fromReadable<BytesSourceFailed, Uint8Array>(() => source, (cause) => new BytesSourceFailed(String(cause)))
  }
  if (isWebStream(source)) {
    return Stream.fromReadableStream({ evaluate: () => source, onError: (cause) => new BytesSourceFailed(String(cause)) })
  }
  return Stream.fromAsyncIterable(source, (cause) => new BytesSourceFailed(String(cause)))
}

const headersOf = (options: Options): Record<string, string> => ({
  // A proxy must not transform (compress) the body.
  "cache-control": "no-transform",
  "x-content-type-options": "nosniff",
  ...(options.contentDisposition === undefined ? {} : { "content-disposition": options.contentDisposition })
})

/** The streamed response of a binary answer. The source is opened when the body starts. */
export const response = (answer: Bytes): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(Stream.suspend(() => toStream(answer.open())), {
    contentType: answer.options.contentType ?? "application/octet-stream",
    ...(answer.options.contentLength === undefined ? {} : { contentLength: answer.options.contentLength }),
    headers: headersOf(answer.options)
  })

/** The head of a binary answer (HEAD requests): the source is never opened. */
export const head = (answer: Bytes): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.empty({
    status: 200,
    headers: {
      "content-type": answer.options.contentType ?? "application/octet-stream",
      ...(answer.options.contentLength === undefined ? {} : { "content-length": String(answer.options.contentLength) }),
      ...headersOf(answer.options)
    }
  })

/** A route's result as a response: a binary answer is streamed (only its head for `HEAD`), a response passes. */
export const toResponse = (
  result: HttpServerResponse.HttpServerResponse | Bytes,
  method: string
): HttpServerResponse.HttpServerResponse => isBytes(result) ? (method === "HEAD" ? head(result) : response(result)) : result
