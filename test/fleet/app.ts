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
 * serves the app without row history; `FW_TRACE_DELIVERY=1` records the fleet tap's reads, announcements and notifications as the driver sees them (`GET /_trace`, the benchmark's per-change breakdown); `FW_LEASE_MS` sets `idempotency.leaseMs`; `FW_POLL_MS` sets
 * the fleet tap's periodic outbox read (default 1 s); `FW_COUNT_QUERIES=1` counts the statements this
 * process sends to PostgreSQL (every `pg` client's, by prepared name or the text's start) and shows
 * them on `GET /_queries` (the benchmark's statements per write).
 */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect, Option, Schema } from "effect"
import * as perf_hooks from "node:perf_hooks"
import pg from "pg"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import { rowHistoryPlugin } from "../../src/history/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
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

/**
 * The timestamps of the fleet tap's work (`FW_TRACE_DELIVERY=1`), seen from the `pg` driver, for the
 * benchmark's per-change breakdown of write → event latency: each outbox page read's start (the
 * call) and end (its answer handed back), each announcement this replica sent (its payload is the
 * replica's origin), each notification heard on the fleet channel with its payload, and the event
 * loop's delay. Wrapped at the driver so the framework carries no tracing of its own for it.
 */
const trace = {
  reads: [] as Array<readonly [number, number]>,
  heard: [] as Array<readonly [number, string]>,
  origin: undefined as string | undefined,
  delay: perf_hooks.monitorEventLoopDelay({ resolution: 1 })
}
/** Most entries kept of each list (a benchmark run's worth). */
const traceKept = 500_000
const traceDelivery = () => {
  type Query = (this: pg.Client, config: unknown, ...rest: Array<unknown>) => unknown
  const prototype = pg.Client.prototype as unknown as { query: Query; emit: (this: pg.Client, event: string | symbol, ...args: Array<unknown>) => boolean }
  const query = prototype.query
  prototype.query = function(config, ...rest) {
    const name = typeof config === "object" && config !== null && "name" in config ? config.name : undefined
    if (name === "fw_outbox_announce" && trace.origin === undefined) {
      const values = (config as { readonly values?: ReadonlyArray<unknown> }).values
      if (typeof values?.[1] === "string") trace.origin = values[1]
    }
    const callback = rest[0]
    if (name !== "fw_outbox_page" || typeof callback !== "function" || trace.reads.length >= traceKept) return query.call(this, config, ...rest)
    const started = Date.now()
    return query.call(this, config, (...args: Array<unknown>) => {
      trace.reads.push([started, Date.now()])
      return (callback as (...args: Array<unknown>) => unknown)(...args)
    }, ...rest.slice(1))
  }
  const emit = prototype.emit
  prototype.emit = function(event, ...args) {
    if (event === "notification" && trace.heard.length < traceKept) {
      const message = args[0] as { readonly channel?: string; readonly payload?: string }
      if (message.channel === ChangeTap.fleetChannel && message.payload !== undefined) trace.heard.push([Date.now(), message.payload])
    }
    return emit.call(this, event, ...args)
  }
  trace.delay.enable()
}

const main = () => {
  if (process.env.FW_COUNT_QUERIES === "1") countQueries()
  if (process.env.FW_TRACE_DELIVERY === "1") traceDelivery()
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
      yield* router.add("GET", "/_trace", Effect.sync(() => {
        const delay = trace.delay
        const ms = (ns: number) => Math.round(ns / 1e4) / 100
        const body = {
          reads: trace.reads,
          heard: trace.heard,
          origin: trace.origin ?? null,
          loopDelay: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max) }
        }
        delay.reset()
        return HttpServerResponse.unsafeJson(body)
      }))
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
