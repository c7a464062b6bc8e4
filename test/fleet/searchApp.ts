/**
 * A replica for the shared-search test, run as a real process: the `docs` table mirrored by the
 * search plugin into the sql backend on the same PostgreSQL (`DATABASE_URL`), fleet change scope.
 * Prints `PORT <n>` once it answers HTTP. Routes for the test: `POST /_write` writes a doc;
 * `GET /_repairs` says how many drift entries this replica repaired; `POST /_reindex?holdMs=n`
 * reindexes `docs`, holding the first page `n` ms (so another replica can try meanwhile), and
 * answers `{ran, rows}`. Repair sweeps run every 200 ms.
 */
import { HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { PgClient } from "@effect/sql-pg"
import { Effect, Option, Redacted, Schema } from "effect"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import type { BackendOption } from "../../src/search/Backend.js"
import { searchIndex } from "../../src/search/Options.js"
import { searchPlugin } from "../../src/search/SearchPlugin.js"
import * as Sql from "../../src/search/Sql.js"
import * as Replica from "./replica.js"

/** The indexed table. */
export const Docs = defineTable("docs", { fields: { tenantId: Schema.String, title: Schema.String }, tenantField: "tenantId" })

/** The plugin over `backend` (the test builds one too, for the `search.query` definition). */
export const makePlugin = (backend: BackendOption) =>
  searchPlugin({
    backend,
    indexes: { docs: searchIndex(Docs, { index: "docs", tenantField: "tenantId", map: (row) => ({ id: row.id, tenantId: row.tenantId, title: row.title }) }) },
    sync: { resyncIntervalMs: 200, reindexBatchSize: 50 }
  })

/** Writes a doc in the caller's tenant. */
export const createDoc = defineRestRoute({
  method: "POST",
  path: "/_write",
  input: Schema.Struct({ body: Schema.Struct({ id: Schema.String, title: Schema.String }) }),
  output: Schema.Struct({ id: Schema.String }),
  handler: ({ body }, { store }) => Effect.map(store.insert(Docs, { id: body.id, tenantId: "acme", title: body.title }), (row) => ({ id: row.id }))
})

const subject = Subject.make({ type: "user", id: "searcher", tenantId: "acme" })
const everyone: AuthStrategy.AuthStrategy = {
  id: "everyone",
  outboundHosts: [],
  authenticate: () => Effect.succeed(AuthStrategy.Verdict.Authenticated({ subject }))
}

const main = () => {
  const url = process.env.DATABASE_URL
  if (url === undefined) throw new Error("DATABASE_URL is required")
  const plugin = makePlugin(Sql.backend(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })))
  const app = defineApp({ name: "search-replica", tables: [Docs], restRoutes: [createDoc], auth: [everyone], plugins: [plugin] })
  const routes = HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      yield* router.add("GET", "/_repairs", Effect.map(plugin.running, (running) => HttpServerResponse.unsafeJson({ repaired: running.engine.repaired() })).pipe(Effect.orDie))
      yield* router.add("POST", "/_reindex", Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const holdMs = Number(new URL(request.url, "http://x").searchParams.get("holdMs") ?? 0)
        let held = false
        const outcome = yield* plugin.reindex("docs", () =>
          held || holdMs === 0 ? Effect.void : Effect.zipRight(Effect.sync(() => held = true), Effect.sleep(holdMs)))
        return HttpServerResponse.unsafeJson(Option.match(outcome, { onNone: () => ({ ran: false, rows: 0 }), onSome: (r) => ({ ran: true, rows: r.rows }) }))
      }).pipe(Effect.orDie))
    })
  )
  Replica.launch({ app, routes, probePath: "/_repairs", url, pollMs: 1_000, maxConnections: 8 })
}

if (/searchApp\.(ts|mjs)$/.test(process.argv[1] ?? "")) main()
