/**
 * How the fleet's test apps run as a replica process: served over HTTP on `127.0.0.1` (a free
 * port) on the PostgreSQL at `url` with the fleet change scope, connections named after
 * `FW_REPLICA`. Prints `PORT <n>` once the replica answers HTTP (printed earlier, a first request
 * could reach the socket before its routes and hang). `FW_COALESCE_MS` sets the fleet tap's
 * coalescing window (the benchmark's way to weigh it).
 */
import { FetchHttpClient, HttpServer } from "@effect/platform"
import { NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Schedule } from "effect"
import { createServer } from "node:http"
import type { App } from "../../src/app/App.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as NodeServer from "../../src/server/NodeServer.js"
import * as Server from "../../src/server/Server.js"

/** A replica's app and how it is served. */
export interface Options {
  readonly app: App
  /** Extra routes served beside the app's. */
  readonly routes?: Server.Options["routes"]
  /** The path probed until it answers 2xx; then the port is printed. */
  readonly probePath: string
  /** The PostgreSQL URL. */
  readonly url: string
  /** The fleet tap's periodic outbox read. */
  readonly pollMs: number
  readonly maxConnections: number
}

/**
 * Prints `PORT <n>` once `probePath` answers: the port is known as soon as the socket listens, but
 * its routes are attached after that, and a request in between would wait forever.
 */
const announceWhenReady = (probePath: string) =>
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    if (server.address._tag !== "TcpAddress") return
    const port = server.address.port
    yield* Effect.tryPromise(() => fetch(`http://127.0.0.1:${port}${probePath}`).then((r) => r.ok ? r.arrayBuffer() : Promise.reject(new Error(`${r.status}`)))).pipe(
      // A request that reached the socket before the routes never gets an answer: give up on it.
      Effect.timeoutFail({ duration: "500 millis", onTimeout: () => new Error("no answer yet") }),
      Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 500 }),
      Effect.orDie
    )
    console.log(`PORT ${port}`)
  })

/** Serves the replica until the process is stopped. */
export const launch = (options: Options): void => {
  const Main = Layer.effectDiscard(announceWhenReady(options.probePath)).pipe(
    Layer.provide(Server.layer(options.app, options.routes === undefined ? { announce: false } : { routes: options.routes, announce: false })),
    Layer.provideMerge(NodeServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
    Layer.provide(Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerFleet({
        pollMs: options.pollMs,
        listenCheckMs: 1_000,
        ...(process.env.FW_COALESCE_MS === undefined ? {} : { coalesceMs: Number(process.env.FW_COALESCE_MS) })
      })),
      Layer.provideMerge(PgClient.layer({
        url: Redacted.make(options.url),
        maxConnections: options.maxConnections,
        applicationName: process.env.FW_REPLICA ?? "fw"
      }))
    )),
    Layer.provide(FetchHttpClient.layer)
  )
  Layer.launch(Main).pipe(NodeRuntime.runMain)
}
