/**
 * Serves an app on 127.0.0.1 (random port) for the duration of a scope, and connects clients to it.
 */
import { HttpServer } from "@effect/platform"
import * as NodeServer from "../../src/server/NodeServer.js"
import type { Scope } from "effect"
import { Cause, Context, Effect, HashMap, Layer, Logger, Option } from "effect"
import { createServer } from "node:http"
import type { App } from "../../src/app/App.js"
import * as Server from "../../src/server/Server.js"
import * as Client from "../../src/client/Client.js"
import type { ChangeTap } from "../../src/kernel/changes/ChangeTap.js"
import type { Store } from "../../src/kernel/store/Store.js"

/** Where a served app listens. */
export interface Served {
  readonly url: string
  readonly rpcUrl: string
  readonly wsUrl: string
  /**
   * What the server logged (`LEVEL message`), captured rather than printed: a test that provokes
   * an error log asserts on it here, and the test output shows failures, not expected noise.
   */
  readonly logs: ReadonlyArray<string>
  /** The `traceId` annotation of each line of `logs` (undefined where it had none), in the same order. */
  readonly logTraceIds: ReadonlyArray<string | undefined>
}

/**
 * A logger keeping each line as `LEVEL message` (the cause's first line appended): for a test that
 * provokes a log, to assert on it instead of printing it.
 */
export const capture = (lines: Array<string>, traceIds?: Array<string | undefined>) =>
  Logger.make(({ annotations, cause, logLevel, message }) => {
    const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
    const failure = Cause.isEmpty(cause) ? "" : `: ${Cause.pretty(cause).split("\n")[0]}`
    lines.push(`${logLevel.label} ${text}${failure}`)
    const traceId = HashMap.get(annotations, "traceId")
    traceIds?.push(Option.isSome(traceId) && typeof traceId.value === "string" ? traceId.value : undefined)
  })

/** Serves `app` over `storeLayer` until the scope closes (on `port`; by default a free one). */
export const serve = <E>(
  app: App,
  storeLayer: Layer.Layer<Store | ChangeTap, E>,
  options: Server.Options = {},
  port = 0
): Effect.Effect<Served, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const logs: Array<string> = []
    const logTraceIds: Array<string | undefined> = []
    // Requests run on the runtime the server captured at build time: the logger set here is theirs.
    const context = yield* Layer.build(
      Server.layer(app, { announce: false, ...options }).pipe(
        Layer.provide(storeLayer),
        Layer.provideMerge(NodeServer.layer(createServer, { port, host: "127.0.0.1" }))
      )
    ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture(logs, logTraceIds))))
    const { address } = Context.get(context, HttpServer.HttpServer)
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
    const url = `http://127.0.0.1:${address.port}`
    return { url, rpcUrl: `${url}/rpc`, wsUrl: `ws://127.0.0.1:${address.port}/rpc`, logs, logTraceIds }
  })

/** A client over `POST /rpc`. */
export const httpClient = (served: Served, app: App): Effect.Effect<Client.Client, never, Scope.Scope> =>
  Client.connect(app.procedures.values(), Client.layerHttp(served.rpcUrl))

/** A client over one WebSocket. */
export const wsClient = (served: Served, app: App): Effect.Effect<Client.Client, never, Scope.Scope> =>
  Client.connect(app.procedures.values(), Client.layerWebSocket(served.wsUrl))
