/**
 * The fleet harness's app, run as a real process (`node --import tsx test/fleet/app.ts`): a small
 * fw app on PostgreSQL with the fleet change scope and row history, served over HTTP. It records
 * every change event it receives and shows them on `GET /_events`. Prints `PORT <n>` once it answers
 * HTTP (printed earlier, a first request could reach the socket before its routes and hang).
 * `docs.list` is the live query the harness follows over WebSocket on several replicas.
 * `POST /jobs` is an idempotent REST route whose handler records its run, then waits while a row
 * of `job_gates` names its job (the test's way of holding a handler in flight), then records the job.
 *
 * Environment: `DATABASE_URL` (required); `FW_REPLICA` names its connections (`application_name`); `FW_SLOW_LISTENER_MS` adds a listener that takes that
 * long per event (it must delay neither the callers nor the other listeners; `GET /_slow` says how
 * many it has handled); `FW_HISTORY=off`
 * serves the app without row history; `FW_LEASE_MS` sets `idempotency.leaseMs`; `FW_POLL_MS` sets
 * the fleet tap's periodic outbox read (default 1 s); `FW_COUNT_QUERIES=1` counts the statements this
 * process sends to PostgreSQL (every `pg` client's, by prepared name or the text's start) and shows
 * them on `GET /_queries` (the benchmark's statements per write).
 */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect, Option, Schema } from "effect"
import pg from "pg"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import { rowHistoryPlugin } from "../../src/history/index.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/Table.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as Replica from "./replica.js"

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

/** Every doc, by id: the harness subscribes to it live on several replicas. */
export const list = query("docs.list", {
  input: Schema.Struct({}),
  output: Schema.Array(Schema.Struct({ id: Schema.String, title: Schema.String })),
  handler: (_input, { store }) =>
    Effect.map(store.find(Docs, { orderBy: "id" }), (rows) => rows.map((row) => ({ id: row.id, title: row.title })))
})

/** One row per run of a job's handler (committed as the handler starts). */
export const JobRuns = defineTable("job_runs", { fields: { job: Schema.String, replica: Schema.String } })
/** One row per finished job. */
export const Jobs = defineTable("jobs", { fields: { replica: Schema.String } })
/** While a gate row names a job, its handler waits. */
export const JobGates = defineTable("job_gates", { fields: {} })

const replicaName = process.env.FW_REPLICA ?? "fw"

/** Runs a job once per idempotency key (the test sends one). */
export const runJob = defineRestRoute({
  method: "POST",
  path: "/jobs",
  input: Schema.Struct({ body: Schema.Struct({ id: Schema.String }) }),
  output: Schema.Struct({ id: Schema.String, replica: Schema.String }),
  handler: ({ body }, { store }) =>
    Effect.gen(function*() {
      yield* store.insert(JobRuns, { id: crypto.randomUUID(), job: body.id, replica: replicaName })
      while (Option.isSome(yield* store.get(JobGates, body.id))) yield* Effect.sleep("50 millis")
      yield* store.insert(Jobs, { id: body.id, replica: replicaName })
      return { id: body.id, replica: replicaName }
    })
})

const subject = Subject.make({ type: "user", id: "fleet", tenantId: null })
const bearer: AuthStrategy.AuthStrategy = {
  id: "fleet",
  outboundHosts: [],
  authenticate: () => Effect.succeed(AuthStrategy.Verdict.Authenticated({ subject }))
}

/** The app: the same definition in every replica and in the harness's clients. */
export const app = defineApp({
  tables: [Docs, JobRuns, Jobs, JobGates],
  procedures: [create, retitle, list],
  restRoutes: [runJob],
  auth: [bearer],
  plugins: [rowHistoryPlugin()],
  idempotency: { leaseMs: Number(process.env.FW_LEASE_MS ?? 10_000) }
})
/** The same app without row history (`FW_HISTORY=off`, for the benchmark's peer). */
const appWithoutHistory = defineApp({ tables: [Docs], procedures: [create, retitle], auth: [bearer] })

/** Statements sent, by prepared name or the text's start (`FW_COUNT_QUERIES=1`). */
const queries = new Map<string, number>()
const countQueries = () => {
  type Query = (this: pg.Client, config: unknown, ...rest: Array<unknown>) => unknown
  const prototype = pg.Client.prototype as unknown as { query: Query }
  const original = prototype.query
  prototype.query = function(config, ...rest) {
    const named = typeof config === "object" && config !== null && "name" in config && typeof config.name === "string"
      ? config.name
      : undefined
    const text = typeof config === "string"
      ? config
      : typeof config === "object" && config !== null && "text" in config && typeof config.text === "string"
      ? config.text
      : "?"
    const key = named ?? text.replace(/\s+/g, " ").trim().slice(0, 48)
    queries.set(key, (queries.get(key) ?? 0) + 1)
    return original.call(this, config, ...rest)
  }
}

const main = () => {
  if (process.env.FW_COUNT_QUERIES === "1") countQueries()
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
      let slowHandled = 0
      if (slowMs > 0) {
        yield* tap.subscribe({ name: "slow", onEvent: () => Effect.sleep(slowMs).pipe(Effect.zipRight(Effect.sync(() => void slowHandled++))) })
      }
      yield* router.add("GET", "/_slow", Effect.sync(() => HttpServerResponse.unsafeJson({ handled: slowHandled })))
      yield* router.add("GET", "/_queries", Effect.sync(() => HttpServerResponse.unsafeJson(Object.fromEntries(queries))))
      yield* router.add("GET", "/_events", Effect.sync(() => HttpServerResponse.unsafeJson(received)))
    })
  )
  Replica.launch({
    app: process.env.FW_HISTORY === "off" ? appWithoutHistory : app,
    routes: events,
    probePath: "/_events",
    url,
    // FW_POLL_MS: a scenario that must prove delivery by LISTEN alone sets a long periodic read.
    pollMs: Number(process.env.FW_POLL_MS ?? 1_000),
    maxConnections: 12
  })
}

if (/app\.(ts|mjs)$/.test(process.argv[1] ?? "")) main()
