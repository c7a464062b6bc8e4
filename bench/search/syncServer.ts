/**
 * The app of the search sync benchmark (`sync.ts`), in its own process: a `notes` table mirrored
 * into one search index, written through `POST /rpc` (`notes.add`, every caller the tenant `t1`).
 * Configured by the environment:
 * - `FW_BENCH_STORE`: `memory`, `sqlite` (file `FW_BENCH_DB`) or `pg` (url `FW_BENCH_DB`);
 * - `FW_BENCH_SEARCH`: `off` (no search plugin: the peer), `memory`, `sql` (FTS on the store's
 *   database, its own connection), `engineA`/`engineB` (url `FW_BENCH_ENGINE_URL`) or `engineC`
 *   (its one host `FW_BENCH_ENGINE_URL`).
 * Two bench routes: `GET /_bench/lag`, the index's view as the stats view and the inspect route
 * give it (`backlog`, `lagMs`, …); and, for the memory and sql backends, whose index lives here,
 * `GET /_bench/visible?from=<n>`: the documents the backend has written, from the n-th on, each
 * with the wall-clock ms at which its write returned, and the backend's write calls so far (the documents were searchable by then: the
 * memory index is updated in the call, the sql statement committed). Prints its port.
 */
import { HttpLayerRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeRuntime } from "@effect/platform-node"
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Redacted, Schema } from "effect"
import { createServer } from "node:http"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { mutation } from "../../src/app/Procedure.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Backend from "../../src/search/Backend.js"
import type { BackendOption } from "../../src/search/Backend.js"
import { searchIndex, searchPlugin, searchTables } from "../../src/search/index.js"
import type { SearchBackendShape } from "../../src/search/SearchBackend.js"
import * as Sql from "../../src/search/Sql.js"
import * as NodeServer from "../../src/server/NodeServer.js"
import * as Server from "../../src/server/Server.js"
import { storeTier } from "../support.js"

const storeKind = process.env.FW_BENCH_STORE ?? "memory"
const searchKind = process.env.FW_BENCH_SEARCH ?? "off"
const db = process.env.FW_BENCH_DB ?? ""
const engineUrl = process.env.FW_BENCH_ENGINE_URL ?? ""

/** The mirrored table. */
const Notes = defineTable("notes", {
  fields: { tenantId: Schema.String, title: Schema.String, body: Schema.String },
  tenantField: "tenantId"
})

const add = mutation("notes.add", {
  input: Schema.Struct({ id: Schema.String, title: Schema.String, body: Schema.String }),
  output: Schema.String,
  handler: (input, ctx) => Effect.map(ctx.store.insert(Notes, { ...input, tenantId: ctx.subject.tenantId! }), (row) => row.id)
})

const subject = Subject.make({ type: "user", id: "bench", tenantId: "t1" })
const everyone: AuthStrategy.AuthStrategy = {
  id: "bench",
  outboundHosts: [],
  authenticate: () => Effect.succeed(AuthStrategy.Verdict.Authenticated({ subject }))
}

const client: Layer.Layer<SqlClient.SqlClient, unknown> | null = storeKind === "sqlite"
  ? SqliteClient.layer({ filename: db })
  : storeKind === "pg"
  ? PgClient.layer({ url: Redacted.make(db) })
  : null

/** Documents the local backend wrote: id, then the wall-clock ms its write returned. */
const visible: Array<string | number> = []
/** The local backend's write calls (batches), to show how large batches grow. */
let writes = 0
const now = () => performance.timeOrigin + performance.now()

/** Records when each document the backend wrote returned (memory and sql: the index lives here). */
const recording = (shape: SearchBackendShape): SearchBackendShape => {
  const record = (ids: ReadonlyArray<string>) =>
    Effect.sync(() => {
      writes++
      const at = now()
      for (const id of ids) visible.push(id, at)
    })
  return {
    ...shape,
    upsert: (index, docs) => Effect.tap(shape.upsert(index, docs), () => record(docs.map((doc) => doc.id))),
    ...(shape.write === undefined ? {} : {
      write: (index, ops) =>
        Effect.tap(shape.write!(index, ops), (result) => {
          const refused = new Set(result.refused.map((refusal) => refusal.id))
          return record(ops.filter((op) => op.doc !== null && !refused.has(op.id)).map((op) => op.id))
        })
    })
  }
}

const backendOption = (): BackendOption => {
  switch (searchKind) {
    case "memory":
    case "sql": {
      const inner = Backend.resolve(searchKind === "memory" ? "memory" : Sql.backend(client!))
      return { ...inner, make: Effect.map(inner.make, recording) }
    }
    case "engineA":
    case "engineB":
      return { engine: searchKind, url: engineUrl, apiKey: "bench" }
    case "engineC":
      return { engine: "engineC", appId: "BENCH", apiKey: "bench", hosts: [engineUrl] }
    default:
      throw new Error(`FW_BENCH_SEARCH: unknown backend ${searchKind}`)
  }
}

const plugin = searchKind === "off" ? undefined : searchPlugin({
  backend: backendOption(),
  indexes: {
    notes: searchIndex(Notes, {
      index: "notes",
      tenantField: "tenantId",
      searchableFields: ["title", "body"],
      fields: { title: "string", body: "string", tenantId: "string" },
      map: (row) => ({ id: row.id, tenantId: row.tenantId, title: row.title, body: row.body })
    })
  }
  // The sync options are the defaults, as an app would run (stats flushed every 5 s, the repair sweep every minute).
})

const app = defineApp({ tables: [Notes], procedures: [add], auth: [everyone], plugins: plugin === undefined ? [] : [plugin] })

const json = (body: unknown) => HttpServerResponse.unsafeJson(body)

const benchRoutes = HttpLayerRouter.use((router) =>
  Effect.gen(function*() {
    yield* router.add(
      "GET",
      "/_bench/lag",
      plugin === undefined
        ? Effect.succeed(json({ backlog: 0, lagMs: 0 }))
        : Effect.flatMap(plugin.running, ({ engine }) => Effect.map(engine.view, (views) => json(views[0]))).pipe(Effect.orDie)
    )
    yield* router.add(
      "GET",
      "/_bench/visible",
      Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
        const from = Number(new URL(request.url, "http://x").searchParams.get("from") ?? 0) * 2
        return json({ entries: visible.slice(from), next: visible.length / 2, writes })
      })
    )
  })
)

Layer.launch(Layer.mergeAll(
  Server.layer(app, { routes: benchRoutes, announce: false }),
  Layer.effectDiscard(Effect.map(HttpServer.HttpServer, (server) => {
    if (server.address._tag === "TcpAddress") console.log(`PORT ${server.address.port}`)
  }))
).pipe(
  Layer.provide(storeTier(client, [Notes, ...searchTables])),
  Layer.provide(NodeServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
)).pipe(NodeRuntime.runMain)
