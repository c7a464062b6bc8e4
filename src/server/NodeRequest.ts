/**
 * The `HttpServerRequest` of fw's Node adapter (`NodeServer`): a `node:http` request seen through
 * `@effect/platform`'s interface, everything lazy. A GET route that reads only the method, the URL
 * and a header or two costs one small object: no header copy, no cookie parse, no body reader is
 * made until something asks.
 *
 * It keeps the shape of `@effect/platform-node`'s own request where fw reaches into it: `source`
 * is the `IncomingMessage` (`NodeHttpServerRequest.toIncomingMessage` and `BodyLimit` read it), and
 * `response` resolves the `ServerResponse`.
 */
import type { FileSystem, Headers, HttpMethod, Multipart, Path, Socket } from "@effect/platform"
import { Cookies, HttpIncomingMessage, HttpServerError, HttpServerRequest, UrlParams } from "@effect/platform"
import { NodeMultipart, NodeStream } from "@effect/platform-node"
import type { Scope, Stream } from "effect"
import { Effect, Inspectable, Option } from "effect"
import type * as Http from "node:http"

/** What a request was modified with (`modify`): a new URL, headers or remote address. */
interface Overrides {
  readonly url?: string | undefined
  readonly headers?: Headers.Headers | undefined
  readonly remoteAddress?: string | undefined
}

/** A `node:http` request as an `HttpServerRequest`. */
export class NodeRequest extends Inspectable.Class implements HttpServerRequest.HttpServerRequest {
  readonly [HttpServerRequest.TypeId]: HttpServerRequest.TypeId = HttpServerRequest.TypeId
  readonly [HttpIncomingMessage.TypeId]: HttpIncomingMessage.TypeId = HttpIncomingMessage.TypeId
  readonly url: string

  constructor(
    readonly source: Http.IncomingMessage,
    /** The response, or how to make it (a WebSocket upgrade has none until it answers over HTTP). */
    readonly response: Http.ServerResponse | (() => Http.ServerResponse),
    private readonly upgradeEffect?: Effect.Effect<Socket.Socket, HttpServerError.RequestError>,
    private readonly overrides?: Overrides
  ) {
    super()
    this.url = overrides?.url ?? source.url!
  }

  /** The `ServerResponse` to answer on. */
  get resolvedResponse(): Http.ServerResponse {
    return typeof this.response === "function" ? this.response() : this.response
  }

  get originalUrl(): string {
    return this.source.url!
  }

  get method(): HttpMethod.HttpMethod {
    // Node reports standard methods in upper case already.
    return this.source.method! as HttpMethod.HttpMethod
  }

  get headers(): Headers.Headers {
    // Node's header object is already lower-cased and read-only by convention: no copy.
    return this.overrides?.headers ?? this.source.headers as Headers.Headers
  }

  private cachedCookies: Record<string, string> | undefined
  get cookies(): Record<string, string> {
    return this.cachedCookies ??= Cookies.parseHeader(this.headers["cookie"] ?? "")
  }

  get remoteAddress(): Option.Option<string> {
    return Option.fromNullable(this.overrides?.remoteAddress ?? this.source.socket.remoteAddress)
  }

  /** The body readers' error mapping (made on demand: most requests read no body). */
  private get onError(): (cause: unknown) => HttpServerError.RequestError {
    return (cause) => new HttpServerError.RequestError({ request: this, reason: "Decode", cause })
  }

  private textEffect: Effect.Effect<string, HttpServerError.RequestError> | undefined
  get text(): Effect.Effect<string, HttpServerError.RequestError> {
    // Cached: the body stream can be read once, and every later reader gets the same text.
    return this.textEffect ??= Effect.runSync(Effect.cached(
      Effect.flatMap(HttpIncomingMessage.MaxBodySize, (maxBodySize) =>
        NodeStream.toString(() => this.source, { onFailure: this.onError, maxBytes: Option.getOrUndefined(maxBodySize) }))
    ))
  }

  get json(): Effect.Effect<unknown, HttpServerError.RequestError> {
    return Effect.tryMap(this.text, { try: (text) => text === "" ? null : JSON.parse(text) as unknown, catch: this.onError })
  }

  get urlParamsBody(): Effect.Effect<UrlParams.UrlParams, HttpServerError.RequestError> {
    return Effect.flatMap(this.text, (text) =>
      Effect.try({ try: () => UrlParams.fromInput(new URLSearchParams(text)), catch: this.onError }))
  }

  get arrayBuffer(): Effect.Effect<ArrayBuffer, HttpServerError.RequestError> {
    return Effect.flatMap(HttpIncomingMessage.MaxBodySize, (maxBodySize) =>
      NodeStream.toUint8Array(() => this.source, { onFailure: this.onError, maxBytes: Option.getOrUndefined(maxBodySize) }).pipe(
        Effect.map((bytes) => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer)
      ))
  }

  get stream(): Stream.Stream<Uint8Array, HttpServerError.RequestError> {
    return NodeStream.fromReadable<HttpServerError.RequestError, Uint8Array>(() => this.source, this.onError)
  }

  private multipartEffect: Effect.Effect<Multipart.Persisted, Multipart.MultipartError, Scope.Scope | FileSystem.FileSystem | Path.Path> | undefined
  get multipart(): Effect.Effect<Multipart.Persisted, Multipart.MultipartError, Scope.Scope | FileSystem.FileSystem | Path.Path> {
    return this.multipartEffect ??= Effect.runSync(Effect.cached(NodeMultipart.persisted(this.source, this.source.headers)))
  }

  get multipartStream(): Stream.Stream<Multipart.Part, Multipart.MultipartError> {
    return NodeMultipart.stream(this.source, this.source.headers)
  }

  get upgrade(): Effect.Effect<Socket.Socket, HttpServerError.RequestError> {
    return this.upgradeEffect ??
      Effect.fail(new HttpServerError.RequestError({ request: this, reason: "Decode", description: "not an upgradeable ServerRequest" }))
  }

  modify(options: Overrides): NodeRequest {
    return new NodeRequest(this.source, this.response, this.upgradeEffect, {
      url: options.url ?? this.overrides?.url,
      headers: options.headers ?? this.overrides?.headers,
      remoteAddress: options.remoteAddress ?? this.overrides?.remoteAddress
    })
  }

  override toString(): string {
    return `ServerRequest(${this.method} ${this.url})`
  }

  toJSON(): unknown {
    return HttpIncomingMessage.inspect(this, { _id: "@effect/platform/HttpServerRequest", method: this.method, url: this.originalUrl })
  }
}
