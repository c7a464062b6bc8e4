/**
 * fw's Node adapter: `@effect/platform`'s `HttpServer` over `node:http`, a drop-in for
 * `NodeHttpServer.layer` that spends less per request.
 *
 * ```ts
 * const Main = Server.layer(app).pipe(
 *   Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
 *   Layer.provide(NodeServer.layer(BootServer.createServer, { port: 3000 })))
 * ```
 *
 * The platform's Node server runs every request through the same generic wrapping (a scope, the
 * tracing middleware, pre-response handlers, an asynchronous write awaited by the request's fiber).
 * When no tracer is installed (the default: see `RequestTracing`), this adapter runs a request as
 * one fiber over a context made in one step: the app, then the answer written straight to the
 * socket (`NodeResponse`), with a `Scope` made only if something uses it (`RequestScope`) and a
 * request object that copies nothing (`NodeRequest`). With a tracer installed, requests take the
 * platform's own path (`HttpApp.toHandled`), so spans and trace propagation are exactly the
 * platform's. WebSocket upgrades always take that path.
 */
import type { HttpApp, HttpMiddleware } from "@effect/platform"
import { HttpApp as HttpAppModule, HttpRouter, HttpServer, HttpServerError, HttpServerRequest, HttpServerResponse, Socket } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import type { Exit, Fiber } from "effect"
import { Cause, Context, Effect, ExecutionStrategy, FiberRef, FiberRefs, FiberSet, Layer, Runtime, Schema, Scope } from "effect"
import type * as Http from "node:http"
import * as HttpModule from "node:http"
import type * as Net from "node:net"
import type { Duplex } from "node:stream"
import * as WS from "ws"
import type * as DirectRoute from "../app/DirectRoute.js"
import * as Launch from "../app/Launch.js"
import * as EarlyBody from "../http/EarlyBody.js"
import * as Now from "../kernel/Now.js"
import * as Telemetry from "../kernel/Telemetry.js"
import * as Dispatch from "./Dispatch.js"
import { NodeRequest } from "./NodeRequest.js"
import * as NodeResponse from "./NodeResponse.js"
import { RequestScope } from "./RequestScope.js"

type Handler = (request: Http.IncomingMessage, response: Http.ServerResponse) => void
type UpgradeHandler = (request: Http.IncomingMessage, socket: Duplex, head: Buffer) => void
type Served<R> = Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, R | HttpServerRequest.HttpServerRequest | Scope.Scope>
/** What a route the server dispatches directly needs: the router's context (`DirectRoute`). */
type Routed<R> = Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, R | DirectRoute.RouteServices>

/** The platform's response step, for the traced path: our writer. */
const handleResponse = (request: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse) =>
  NodeResponse.write(request, (request as NodeRequest).resolvedResponse, response)

/** Writes `response`, after the pre-response handlers a middleware registered (`HttpApp.appendPreResponseHandler`), if any. */
const answer = (request: NodeRequest, nodeResponse: Http.ServerResponse, response: HttpServerResponse.HttpServerResponse) =>
  Effect.withFiberRuntime<void, unknown>((fiber) => {
    const handler = fiber.getFiberRef(HttpAppModule.currentPreResponseHandlers)
    return handler._tag === "None"
      ? NodeResponse.write(request, nodeResponse, response)
      : Effect.flatMap(handler.value(request, response), (handled) => NodeResponse.write(request, nodeResponse, handled))
  })

/** Answers a failed request: the response the cause carries (or a 500), then the rest of the cause. */
const answerFailure = (request: NodeRequest, nodeResponse: Http.ServerResponse) => (cause: Cause.Cause<unknown>) =>
  Effect.flatMap(HttpServerError.causeResponse(cause), ([response, rest]) =>
    Effect.zipRight(answer(request, nodeResponse, response), Cause.isEmptyType(rest) ? Effect.void : Effect.failCause(rest)))

/**
 * Interrupts the request's fiber when the client goes away before the answer is complete (a
 * long-polling or streaming handler stops instead of running for nobody).
 */
const interruptOnAbort = (nodeResponse: Http.ServerResponse, fiber: { unsafeInterruptAsFork: (id: typeof HttpServerError.clientAbortFiberId) => void }) => {
  nodeResponse.on("close", () => {
    if (!nodeResponse.writableEnded) fiber.unsafeInterruptAsFork(HttpServerError.clientAbortFiberId)
  })
}

/**
 * The lean request handler (no tracer installed): one fiber per request, the answer written at
 * once. A route with an eager twin in the app's dispatch table (`Dispatch`) is called directly,
 * its global middleware in their eager forms; an answer it gives at once is written with no
 * fiber at all, anything else runs in the request's fiber with the context the router would give.
 */
const leanHandler = <R>(runtime: Runtime.Runtime<R>, app: Served<R>, table: Dispatch.Table | undefined): Handler => {
  const base = runtime.context.unsafeMap
  const { fiberRefs, runtimeFlags } = runtime
  const requestKey = HttpServerRequest.HttpServerRequest.key
  const scopeKey = Scope.Scope.key
  // Pre-response handlers in the server's own fiber refs apply to every answer: then every answer goes through a fiber.
  const writesAtOnce = FiberRefs.getOrDefault(fiberRefs, HttpAppModule.currentPreResponseHandlers)._tag === "None"
  const run = (request: NodeRequest, nodeResponse: Http.ServerResponse, served: Routed<R>, route?: Dispatch.Found) => {
    const scope = new RequestScope(ExecutionStrategy.sequential)
    const services = new Map(base)
    services.set(requestKey, request)
    services.set(scopeKey, scope)
    if (route !== undefined) {
      services.set(HttpServerRequest.ParsedSearchParams.key, route.searchParams)
      services.set(HttpRouter.RouteContext.key, { [HttpRouter.RouteContextTypeId]: HttpRouter.RouteContextTypeId, route: route.route, params: route.params })
    }
    const answered = Effect.matchCauseEffect(served, {
      onSuccess: (response) => answer(request, nodeResponse, response),
      onFailure: answerFailure(request, nodeResponse)
    })
    const effect = Effect.uninterruptible(Effect.onExit(answered, (exit) => scope.used ? scope.close(exit) : Effect.void))
    const fiber = Runtime.runFork(Runtime.make({ context: Context.unsafeMake(services), fiberRefs, runtimeFlags }), effect)
    interruptOnAbort(nodeResponse, fiber)
  }
  const dispatch = (request: NodeRequest, nodeResponse: Http.ServerResponse, found: Dispatch.Found, twin: DirectRoute.Direct) => {
    let direct: DirectRoute.Answer
    try {
      direct = twin(request, found.params, found.searchParams)
    } catch (defect) {
      direct = Effect.die(defect)
    }
    if (writesAtOnce) {
      const call = Now.laterOf(direct)
      if (call !== undefined) return awaitCall(request, nodeResponse, found, table!.edge(request, direct), call.fiber)
    }
    const answered = table!.edge(request, Now.exitOf(direct) !== undefined || found.route.uninterruptible ? direct : Effect.interruptible(direct))
    const exit = Now.exitOf(answered)
    if (writesAtOnce && exit !== undefined && exit._tag === "Success" && NodeResponse.writeNow(nodeResponse, request.method, exit.value)) return
    run(request, nodeResponse, answered, found)
  }
  /**
   * A twin's answer that waits for a call already running on a fiber of its own (`Now.later`: an
   * rpc call waiting for the database): written from that fiber's end when the rest answers at
   * once, else the rest runs in a request fiber then — no request fiber only to await the call.
   * A client that goes away interrupts the call's fiber (unless the route is uninterruptible), as
   * it interrupted the request fiber awaiting it.
   */
  const awaitCall = (
    request: NodeRequest,
    nodeResponse: Http.ServerResponse,
    found: Dispatch.Found,
    answered: DirectRoute.Answer,
    call: Fiber.RuntimeFiber<unknown, unknown>
  ) => {
    if (!found.route.uninterruptible) interruptOnAbort(nodeResponse, call)
    const pending = Now.laterOf(answered)
    // A global middleware's edge that is not eager for it: the request's fiber awaits the call.
    if (pending === undefined) return run(request, nodeResponse, answered, found)
    const ended = (exit: Exit.Exit<unknown, unknown>) => {
      let rest: DirectRoute.Answer
      try {
        rest = pending.then(exit)
      } catch (defect) {
        rest = Effect.die(defect)
      }
      // Called from the call fiber's end: nothing may throw into its runtime.
      try {
        const done = Now.exitOf(rest)
        if (done !== undefined && done._tag === "Success" && NodeResponse.writeNow(nodeResponse, request.method, done.value)) return
      } catch (defect) {
        rest = Effect.die(defect)
      }
      run(request, nodeResponse, rest, found)
    }
    const polled = call.unsafePoll()
    if (polled !== null) ended(polled)
    else call.addObserver(ended)
  }
  return (nodeRequest, nodeResponse) => {
    const request = new NodeRequest(nodeRequest, nodeResponse)
    // A CORS preflight is answered by the edge before routing: it never goes direct.
    const found = table === undefined || nodeRequest.method === "OPTIONS" ? undefined : table.find(nodeRequest.method!, request.url)
    if (found?.direct === undefined) return run(request, nodeResponse, app)
    // A twin that wants its body first (`EarlyBody`: `POST /rpc`) is called once the body is in.
    const twin = found.direct
    const bodyLimit = EarlyBody.limitOf(twin)
    if (bodyLimit !== undefined) return EarlyBody.collect(nodeRequest, bodyLimit, () => dispatch(request, nodeResponse, found, twin))
    dispatch(request, nodeResponse, found, twin)
  }
}

/** The platform's request handling (spans, pre-response handlers), over our request and writer. */
const handledHandler = <R>(runtime: Runtime.Runtime<R>, handled: Effect.Effect<void, never, R | HttpServerRequest.HttpServerRequest>): Handler => {
  const runFork = Runtime.runFork(runtime)
  return (nodeRequest, nodeResponse) => {
    const fiber = runFork(Effect.provideService(handled, HttpServerRequest.HttpServerRequest, new NodeRequest(nodeRequest, nodeResponse)))
    interruptOnAbort(nodeResponse, fiber)
  }
}

/**
 * WebSocket upgrades through the platform's request handling: the request's `upgrade` hands the
 * socket to `ws`; an answer over HTTP instead (a refusal) is written on the raw socket.
 */
const upgradeHandler = <R>(
  wss: Effect.Effect<WS.WebSocketServer>,
  handled: Effect.Effect<void, never, R | HttpServerRequest.HttpServerRequest>
): Effect.Effect<UpgradeHandler, never, R | Scope.Scope> =>
  Effect.map(FiberSet.makeRuntime<R>(), (runFork) => (nodeRequest, socket, head) => {
    let upgraded = false
    let nodeResponse: Http.ServerResponse | undefined
    const responseOf = () => {
      if (nodeResponse === undefined) {
        nodeResponse = new HttpModule.ServerResponse(nodeRequest)
        if (upgraded) {
          nodeResponse.end()
        } else {
          nodeResponse.assignSocket(socket as Net.Socket)
          nodeResponse.on("finish", () => socket.end())
        }
      }
      return nodeResponse
    }
    const upgrade = Socket.fromWebSocket(Effect.flatMap(wss, (server) =>
      Effect.acquireRelease(
        Effect.async<globalThis.WebSocket>((resume) =>
          server.handleUpgrade(nodeRequest, socket, head, (ws) => {
            upgraded = true
            resume(Effect.succeed(ws as unknown as globalThis.WebSocket))
          })
        ),
        (ws) => Effect.sync(() => ws.close())
      )))
    const fiber = runFork(Effect.provideService(handled, HttpServerRequest.HttpServerRequest, new NodeRequest(nodeRequest, responseOf, upgrade)))
    socket.on("close", () => {
      if (!socket.writableEnded) fiber.unsafeInterruptAsFork(HttpServerError.clientAbortFiberId)
    })
  })

/** Whether requests get the platform's span: a tracer is installed and tracing is on. */
const traced = Effect.zipWith(Effect.tracer, FiberRef.get(FiberRef.currentTracerEnabled), (tracer, enabled) => enabled && Telemetry.isInstalled(tracer))

/**
 * The listener could not start: the port is taken, needs privileges, or is not a port. Its message
 * is one line saying what to do (its stack is that line: a boot error is read, not debugged).
 */
export class ListenFailed extends Schema.TaggedError<ListenFailed>()("ListenFailed", {
  port: Schema.optional(Schema.Number),
  host: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/** What `listen` with `options` failing with `error` means for the user, as a `ListenFailed`. */
export const listenFailed = (options: Net.ListenOptions, error: unknown): ListenFailed => {
  const code = (error as { readonly code?: unknown } | null)?.code
  const where = `${options.host ?? "every interface"}${options.port === undefined ? "" : `, port ${options.port}`}`
  const message = code === "EADDRINUSE"
    ? `port ${options.port} is in use (on ${options.host ?? "every interface"}): stop the program listening there, or serve on another port`
    : code === "EACCES"
    ? `port ${options.port} needs privileges this process does not have: serve on a port above 1023`
    : code === "ERR_SOCKET_BAD_PORT"
    ? `port ${String(options.port)} is not a port: choose one from 1 to 65535 (0 for any free port)`
    : code === "EADDRNOTAVAIL" || code === "ENOTFOUND" || code === "EAI_AGAIN"
    ? `host ${options.host} is not an address of this machine: serve on 127.0.0.1, 0.0.0.0 or one of its own addresses`
    : `cannot listen on ${where}: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`
  const failed = new ListenFailed({
    ...(typeof options.port === "number" ? { port: options.port } : {}),
    ...(options.host === undefined ? {} : { host: options.host }),
    message
  })
  failed.stack = `ListenFailed: ${message}`
  return failed
}

/** The `HttpServer` listening on the server `evaluate` makes, with `options` (port, host, ...). */
export const make = (
  evaluate: () => Http.Server,
  options: Net.ListenOptions
): Effect.Effect<HttpServer.HttpServer, ListenFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const server = yield* Effect.acquireRelease(
      Effect.sync(evaluate),
      (server) =>
        Effect.async<void>((resume) => {
          if (!server.listening) return resume(Effect.void)
          server.close((error) => resume(error ? Effect.die(error) : Effect.void))
        })
    )
    yield* Effect.async<void, ListenFailed>((resume) => {
      const onError = (cause: Error) => resume(Effect.fail(listenFailed(options, cause)))
      server.on("error", onError)
      try {
        server.listen(options, () => {
          server.off("error", onError)
          resume(Effect.void)
        })
      } catch (error) {
        // `listen` throws at once for a port out of range (`ERR_SOCKET_BAD_PORT`).
        server.off("error", onError)
        resume(Effect.fail(listenFailed(options, error)))
      }
    })
    const address = server.address()!
    // The WebSocket server is made on the first upgrade, and closed with the listener.
    const wss = yield* Effect.acquireRelease(
      Effect.sync(() => new WS.WebSocketServer({ noServer: true })),
      (wss) => Effect.async<void>((resume) => wss.close(() => resume(Effect.void)))
    ).pipe(Scope.extend(scope), Effect.cached)
    return HttpServer.make({
      address: typeof address === "string"
        ? { _tag: "UnixAddress", path: address }
        : { _tag: "TcpAddress", hostname: address.address === "::" ? "0.0.0.0" : address.address, port: address.port },
      serve: (httpApp: HttpApp.Default<unknown>, middleware?: HttpMiddleware.HttpMiddleware): Effect.Effect<void, never, Scope.Scope> =>
        Effect.gen(function*() {
          const runtime = yield* Effect.runtime<never>()
          const handled = HttpAppModule.toHandled(httpApp, handleResponse, middleware)
          const app: Served<never> = middleware === undefined ? httpApp : middleware(httpApp)
          // Direct dispatch only where nothing wraps the app: a server middleware (the request logger) sees every request.
          // Its twins skip the framework's spans and metrics too: only when no tracer is installed at all.
          const table = middleware === undefined && !Telemetry.isInstalled(yield* Effect.tracer) ? Dispatch.tableOf(httpApp) : undefined
          const handler = (yield* traced) ? handledHandler(runtime, handled) : leanHandler(runtime, app, table)
          const onUpgrade = yield* upgradeHandler<never>(wss, handled)
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => {
              server.off("request", handler)
              server.off("upgrade", onUpgrade)
            })
          )
          server.on("request", handler)
          server.on("upgrade", onUpgrade)
        })
    })
  })

/**
 * `HttpServer` on the `node:http` server `evaluate` makes, with the platform context the Node
 * server provides (`NodeHttpServer.layerContext`: file system, path, ETags, ...).
 */
export const layer = (evaluate: () => Http.Server, options: Net.ListenOptions): Layer.Layer<
  HttpServer.HttpServer | Layer.Layer.Success<typeof NodeHttpServer.layerContext>,
  ListenFailed
> => Layer.mergeAll(Layer.scoped(HttpServer.HttpServer, make(evaluate, options)), NodeHttpServer.layerContext)

/**
 * `NodeRuntime.runMain` reporting a boot failure as one line (`fw: port 3000 is in use …`, exit
 * code 1; see `Launch`) instead of a logged cause under a time and fiber header: what the `fw` CLI
 * prints, for a program that launches its own server (`Layer.launch(Main).pipe(NodeServer.runMain)`).
 * A defect that is not a refused setting is logged whole, stack and all, as `runMain` does.
 */
export const runMain = <A, E>(effect: Effect.Effect<A, E>, options?: { readonly disablePrettyLogger?: boolean }): void =>
  NodeRuntime.runMain(Effect.tapErrorCause(effect, Launch.reportCause), { ...options, disableErrorReporting: true })
