/**
 * A replica for the shared rate-limit test, run as a real process: one REST route limited to
 * `FW_LIMIT` requests per hour for every caller (all callers are one subject), on the PostgreSQL
 * at `DATABASE_URL`, counters in its `_fw_rate_limits`. Prints `PORT <n>` once ready.
 */
import { FetchHttpClient, HttpServer } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { createServer } from "node:http"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Server from "../../src/server/Server.js"

const subject = Subject.make({ type: "user", id: "shared", tenantId: "acme" })
const everyone: AuthStrategy.AuthStrategy = {
  id: "everyone",
  outboundHosts: [],
  authenticate: () => Effect.succeed(AuthStrategy.Verdict.Authenticated({ subject }))
}

const limit = Number(process.env.FW_LIMIT ?? 25)

/** The limited route: answers which replica served it. */
export const hit = defineRestRoute({
  method: "POST",
  path: "/hit",
  rateLimit: { limit, windowMs: 3_600_000 },
  handler: () => Effect.succeed({ replica: process.env.FW_REPLICA ?? "?" })
})

const main = () => {
  const url = process.env.DATABASE_URL
  if (url === undefined) throw new Error("DATABASE_URL is required")
  const app = defineApp({ name: "rate-limit-replica", restRoutes: [hit], auth: [everyone] })
  const Main = Layer.mergeAll(
    Server.layer(app, { announce: false }),
    Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
      if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
    }))
  ).pipe(
    Layer.provide(Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 8 }))
    )),
    Layer.provide(FetchHttpClient.layer),
    Layer.provide(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
  )
  Layer.launch(Main).pipe(NodeRuntime.runMain)
}

if (/rateLimitApp\.(ts|mjs)$/.test(process.argv[1] ?? "")) main()
