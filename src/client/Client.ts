/**
 * A typed client of an fw app over rpc: `call(procedure, input)` and `live(query, input)`, over
 * `POST /rpc` (`layerHttp`) or one WebSocket (`layerWebSocket`). Procedures are passed as values,
 * so inputs and outputs are typed by their schemas.
 */
import { FetchHttpClient, Socket } from "@effect/platform"
import type { Headers } from "@effect/platform"
import { RpcClient, RpcSerialization } from "@effect/rpc"
import type { RpcClientError } from "@effect/rpc/RpcClientError"
import type { Schema, Scope } from "effect"
import { Effect, Layer, Stream } from "effect"
import { liveSuffix } from "../app/App.js"
import type { AreaErrorClass, ProcedureError } from "../app/Errors.js"
import type * as Procedure from "../app/Procedure.js"
import * as RpcGroup from "../app/RpcGroup.js"

/** Per-call options: headers ride in the rpc message (an auth token on the socket, for example). */
export interface CallOptions {
  readonly headers?: Headers.Input
}

/** The input type of a procedure. */
export type InputOf<P> = P extends Procedure.Procedure<Procedure.Kind, string, infer I, infer _IE, infer _O, infer _OE> ? I : never
/** The output type of a procedure. */
export type OutputOf<P> = P extends Procedure.Procedure<Procedure.Kind, string, infer _I, infer _IE, infer O, infer _OE> ? O
  : never

/** A connected client; `E` is the area errors it was given (see `Options.errors`). */
export interface Client<E = never> {
  readonly call: <P extends Procedure.Any>(
    procedure: P,
    input: InputOf<P>,
    options?: CallOptions
  ) => Effect.Effect<OutputOf<P>, ProcedureError | E | RpcClientError>
  /** Subscribes to a query: its result now, then again after every relevant committed change. */
  readonly live: <P extends Procedure.Any & { readonly kind: "query" }>(
    procedure: P,
    input: InputOf<P>,
    options?: CallOptions
  ) => Stream.Stream<OutputOf<P>, ProcedureError | E | RpcClientError>
}

/** Options of a client. */
export interface Options<Errors extends ReadonlyArray<AreaErrorClass> = ReadonlyArray<AreaErrorClass>> {
  /**
   * The area error classes the procedures may fail with (the app's plugins' `errors`, for example
   * `searchErrors`): decoded with their own tag. Without them such a failure does not decode.
   */
  readonly errors?: Errors
}

/** The error instances of an `errors` list. */
export type ErrorsOf<Errors extends ReadonlyArray<AreaErrorClass>> = Schema.Schema.Type<Errors[number]>

/** Connects a client for `procedures` over the provided protocol. */
export const make = <const Errors extends ReadonlyArray<AreaErrorClass> = readonly []>(
  procedures: Iterable<Procedure.Any>,
  options: Options<Errors> = {}
): Effect.Effect<Client<ErrorsOf<Errors>>, never, RpcClient.Protocol | Scope.Scope> =>
  Effect.gen(function*() {
    const list = [...procedures]
    const known = new Set(list.map((procedure) => procedure.tag))
    const flat = yield* RpcClient.make(RpcGroup.group(list, "client", options.errors), { flatten: true, disableTracing: true })
    // The builder boundary: the flat client is typed over the erased group; types come from the procedure values.
    const invoke = flat as unknown as (tag: string, input: unknown, options?: CallOptions) => unknown
    // A procedure the client was not connected with is a programming error: say so, instead of
    // the rpc client's TypeError on its missing schema.
    const unknownProcedure = (tag: string) => `procedure "${tag}" is not among the procedures this client was connected with`
    return {
      call: (procedure, input, options) =>
        known.has(procedure.tag)
          ? invoke(procedure.tag, input, options) as Effect.Effect<never, ProcedureError | ErrorsOf<Errors> | RpcClientError>
          : Effect.dieMessage(unknownProcedure(procedure.tag)),
      live: (procedure, input, options) =>
        known.has(procedure.tag)
          ? invoke(`${procedure.tag}${liveSuffix}`, input, options) as Stream.Stream<never, ProcedureError | ErrorsOf<Errors> | RpcClientError>
          : Stream.dieMessage(unknownProcedure(procedure.tag))
    }
  })

/**
 * Connects a client over `protocol` for the lifetime of the current scope (the protocol's
 * connection stays open until the scope closes).
 */
export const connect = <E, const Errors extends ReadonlyArray<AreaErrorClass> = readonly []>(
  procedures: Iterable<Procedure.Any>,
  protocol: Layer.Layer<RpcClient.Protocol, E>,
  options: Options<Errors> = {}
): Effect.Effect<Client<ErrorsOf<Errors>>, E, Scope.Scope> =>
  Effect.flatMap(Layer.build(protocol), (context) => Effect.provide(make(procedures, options), context))

/** The `POST /rpc` transport to `url` (for example `http://127.0.0.1:3000/rpc`). */
export const layerHttp = (url: string): Layer.Layer<RpcClient.Protocol> =>
  RpcClient.layerProtocolHttp({ url }).pipe(
    Layer.provide([FetchHttpClient.layer, RpcSerialization.layerJson])
  )

/**
 * The platform's WebSocket: the global one (browsers, Node 22+), else the `ws` package, loaded
 * only then so that a browser bundle never contains it.
 */
const webSocketConstructor: Layer.Layer<Socket.WebSocketConstructor> = Layer.effect(
  Socket.WebSocketConstructor,
  "WebSocket" in globalThis
    ? Effect.succeed((url: string, protocols?: string | Array<string>) => new globalThis.WebSocket(url, protocols))
    : Effect.promise(() => import("ws")).pipe(
      Effect.map(({ WebSocket }) => (url: string, protocols?: string | Array<string>) =>
        new WebSocket(url, protocols) as unknown as globalThis.WebSocket
      )
    )
)

/** The WebSocket transport to `url` (for example `ws://127.0.0.1:3000/rpc`). */
export const layerWebSocket = (url: string): Layer.Layer<RpcClient.Protocol> =>
  RpcClient.layerProtocolSocket({ retryTransientErrors: false }).pipe(
    Layer.provide([
      Layer.scoped(Socket.Socket, Socket.makeWebSocket(url)).pipe(Layer.provide(webSocketConstructor)),
      RpcSerialization.layerJson
    ])
  )
