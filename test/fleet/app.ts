/**
 * The fleet harness's app, run as a real process (`node --import tsx test/fleet/app.ts`): a small
 * fw app on PostgreSQL with the fleet change scope and row history, served over HTTP. It records
 * every change event it receives and shows them on `GET /_events`. Prints `PORT <n>` once ready.
 *
 * Environment: `DATABASE_URL` (required); `FW_REPLICA` names its connections (`application_name`); `FW_SLOW_LISTENER_MS` adds a listener that takes that
 * long per event (it must delay neither the callers nor the other listeners); `FW_HISTORY=off`
 * serves the app without row history.
 */
import { FetchHttpClient, HttpLayerRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Schema } from "effect"
import { createServer } from "node:http"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { mutation } from "../../src/app/Procedure.js"
import { rowHistoryPlugin } from "../../src/history/index.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/Table.js"
import * as Server from "../../src/server/Server.js"

/** The one app table. */
export const Docs = defineTable("docs", { fields: { title: Schema.String } })

/** Creates a doc. */
export const create = mutation("docs.create", {
  input: Schema.Struct({ id: Schema.String, title: Schema.String }),
  output: Schema.Struct({ id: Schema.String }),
  handler: (input, { store }) => Effect.map(store.insert(Docs, input), (row) => ({ id: row.id }))
})

/** Retitles a doc. */
export const retitle = mutation("docs.retitle", {
  input: Schema.Struct({ id: Schema.String, title: Schema.String }),
  output: Schema.Struct({ id: Schema.String }),
  handler: (input, { store }) => Effect.map(store.update(Docs, input.id, { title: input.title }), (row) => ({ id: row.id }))
})

const subject = Subject.make({ type: "user", id: "fleet", tenantId: null })
const bearer: AuthStrategy.AuthStrategy = {
  id: "fleet",
  outboundHosts: [],
  authenticate: () => Effect.succeed(AuthStrategy.Verdict.Authenticated({ subject }))
}

/** The app: the same definition in every replica and in the harness's clients. */
export const app = defineApp({ tables: [Docs], procedures: [create, retitle], auth: [bearer], plugins: [rowHistoryPlugin()] })
/** The same app without row history (`FW_HISTORY=off`, for the benchmark's peer). */
const appWithoutHistory = defineApp({ tables: [Docs], procedures: [create, retitle], auth: [bearer] })

const main = () => {
  const url = process.env.DATABASE_URL
  if (url === undefined) throw new Error("DATABASE_URL is required")
  const slowMs = Number(process.env.FW_SLOW_LISTENER_MS ?? 0)
  const received: Array<{ readonly id: string; readonly title: unknown; readonly remote: boolean; readonly at: number; readonly receivedAt: number }> = []
  const events = HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const tap = yield* ChangeTap.ChangeTap
      yield* tap.subscribe({
        name: "harness",
        onEvent: (event) =>
          Effect.sync(() => {
            if (event.table !== "docs") return
            received.push({ id: event.id, title: event.after?.title ?? null, remote: event.remote === true, at: event.at, receivedAt: Date.now() })
          })
      })
      if (slowMs > 0) yield* tap.subscribe({ name: "slow", onEvent: () => Effect.sleep(slowMs) })
      yield* router.add("GET", "/_events", Effect.sync(() => HttpServerResponse.unsafeJson(received)))
    })
  )
  const Main = Layer.mergeAll(
    Server.layer(process.env.FW_HISTORY === "off" ? appWithoutHistory : app, { routes: events, announce: false }),
    Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
      if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
    }))
  ).pipe(
    Layer.provide(Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerFleet({ pollMs: 1_000, listenCheckMs: 1_000 })),
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 12, applicationName: process.env.FW_REPLICA ?? "fw" }))
    )),
    Layer.provide(FetchHttpClient.layer),
    Layer.provide(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
  )
  Layer.launch(Main).pipe(NodeRuntime.runMain)
}

if (/app\.(ts|mjs)$/.test(process.argv[1] ?? "")) main()
