/**
 * The aggregates plugin: the `_fw_aggregate_*` tables, the inspect routes of spec 4.1 (a snapshot
 * of every aggregate with its metadata, and a manual refresh, at the spec's paths
 * `GET /_fw/inspect/aggregates` and `POST /_fw/inspect/aggregates/<name>/refresh`, the plugin's own
 * absolute inspect path, gated like every inspect route; the refresh needs the
 * `canRefreshAggregate` capability), and the `AggregateScheduler` offered to every guard and
 * handler, so `useAggregate(def).read()` works in a procedure (spec 4.2).
 *
 * The routes and handlers reach the running scheduler through `attach`, a layer composed with the
 * scheduler layer: the plugin is declared before the scheduler exists (an app is a value).
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Effect, Either, Layer, Schema } from "effect"
import * as Capabilities from "../app/Capabilities.js"
import * as Dashboard from "./dashboard.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as Plugin from "../app/Plugin.js"
import type * as Aggregate from "./Aggregate.js"
import { AggregateScheduler } from "./AggregateScheduler.js"
import type { AggregateSchedulerShape, Meta } from "./AggregateScheduler.js"
import * as RefreshWords from "./RefreshWords.js"
import { tables } from "./tables.js"

/** Rows per page of `GET /_fw/inspect/aggregates/<name>/rows`, by default and at most. */
const defaultRowLimit = 50
const maxRowLimit = 1000

const describe = (aggregate: Aggregate.Any) => {
  const policy = aggregate.policy
  return {
    name: aggregate.name,
    kind: aggregate.incremental === undefined ? "scheduled" : "incremental",
    refresh: policy._tag === "interval"
      ? { interval: aggregate.refresh, ms: policy.ms }
      : policy._tag === "cron"
      ? { cron: policy.expression, timezone: policy.timezone }
      : policy._tag === "hybrid"
      ? { interval: (aggregate.refresh as { readonly interval: string }).interval, onChange: policy.onChange, debounceMs: policy.debounceMs }
      : null,
    /** The policy in words: "every hour at :00, America/New_York". */
    description: RefreshWords.describe(aggregate),
    bootRefresh: aggregate.bootRefresh,
    strategy: aggregate.strategy,
    ...(aggregate.incremental === undefined ? {} : {
      incremental: {
        source: aggregate.incremental.source,
        op: aggregate.incremental.op,
        column: aggregate.incremental.column ?? null,
        groupBy: aggregate.incremental.groupBy
      }
    })
  }
}

const metaJson = (meta: Meta) => ({
  refreshedAt: meta.refreshedAt?.toISOString() ?? null,
  rowCount: meta.rowCount,
  durationMs: meta.durationMs,
  lastError: meta.lastError,
  nextRefreshAt: meta.nextRefreshAt?.toISOString() ?? null
})

/** The aggregates plugin (tables and inspect routes) and the layer that attaches the running scheduler to it. */
export interface AggregatesPlugin {
  readonly plugin: Plugin.Plugin
  /** Compose with the scheduler layer: `attach.pipe(Layer.provideMerge(AggregateScheduler.layerSql(...)))`. */
  readonly attach: Layer.Layer<never, never, AggregateScheduler>
}

const notRunning = "aggregates: the scheduler is not running (compose aggregatesPlugin().attach with Aggregates.layerMemory or layerSql; the fw CLI does it for *.aggregate.ts files)"

/**
 * The scheduler handlers see: the attached one, looked up at each call (the plugin is built
 * before the scheduler runs); a clear defect when none is attached.
 */
const handlerScheduler = (current: () => AggregateSchedulerShape | undefined): AggregateSchedulerShape => {
  const withRunning = <A, E>(f: (scheduler: AggregateSchedulerShape) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      const running = current()
      return running === undefined ? Effect.dieMessage(notRunning) : f(running)
    })
  return {
    get aggregates() {
      return current()?.aggregates ?? []
    },
    read: (name, options) => withRunning((s) => s.read(name, options)),
    meta: (name) => withRunning((s) => s.meta(name)),
    refresh: (name) => withRunning((s) => s.refresh(name)),
    outcomes: Effect.flatMap(Effect.sync(current), (running) => running === undefined ? Effect.dieMessage(notRunning) : running.outcomes),
    booted: withRunning((s) => s.booted)
  }
}

/**
 * Builds the aggregates plugin: its `_fw_aggregate_*` tables, the inspect routes, and the
 * `AggregateScheduler` for handlers (`useAggregate(def).read()`, `.meta()`, `.refresh()` in a
 * procedure or a REST route), once `attach` runs.
 */
export const aggregatesPlugin = (): AggregatesPlugin => {
  let scheduler: AggregateSchedulerShape | undefined
  const withScheduler = (
    f: (scheduler: AggregateSchedulerShape) => Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, Plugin.RouteServices>
  ) =>
    scheduler === undefined
      ? Effect.succeed(HttpResponses.error(503, "AggregatesNotRunning", "the aggregate scheduler is not running"))
      : f(scheduler)
  const plugin = Plugin.definePlugin({
    name: "aggregates",
    permissions: ["inspect:read", "inspect:write"],
    tables: [...tables],
    dashboardPanel: Dashboard.panel,
    handlerContext: Context.make(AggregateScheduler, handlerScheduler(() => scheduler)),
    inspectRoutes: [
      {
        method: "GET",
        path: "/_fw/inspect/aggregates",
        handler: Effect.suspend(() =>
          withScheduler((s) =>
            Effect.forEach(s.aggregates, (aggregate) =>
              Effect.map(s.meta(aggregate.name), (meta) => ({ ...describe(aggregate), meta: metaJson(meta) }))).pipe(
                Effect.map((aggregates) => HttpServerResponse.unsafeJson({ aggregates }))
              )
          )
        )
      },
      {
        // A page of an aggregate's rows, encoded by its output schema (JSON-safe: dates as text).
        // An aggregate is a materialised result read whole by `read`; the page is cut from it.
        method: "GET",
        path: "/_fw/inspect/aggregates/:name/rows",
        handler: Effect.flatMap(Plugin.RouteParams, (params) =>
          withScheduler((s) => {
            const name = params.name ?? ""
            const aggregate = s.aggregates.find((a) => a.name === name)
            if (aggregate === undefined) {
              return Effect.succeed(HttpResponses.error(404, "AggregateNotFound", `no aggregate named "${name}" is registered`))
            }
            return Effect.gen(function*() {
              const request = yield* HttpServerRequest.HttpServerRequest
              const query = new URL(request.url, "http://inspect.invalid").searchParams
              const limit = Number(query.get("limit") ?? defaultRowLimit)
              const offset = Number(query.get("offset") ?? 0)
              if (!Number.isInteger(limit) || limit < 1 || limit > maxRowLimit || !Number.isInteger(offset) || offset < 0) {
                return HttpResponses.error(400, "QueryInvalid", `limit: a whole number from 1 to ${maxRowLimit}; offset: a whole number from 0`)
              }
              const read = yield* Effect.either(s.read(name, { buildWaitMs: 0 }))
              if (Either.isLeft(read)) {
                return HttpResponses.error(read.left._tag === "AggregateNotFound" ? 404 : 503, read.left._tag, read.left.message)
              }
              const encode = Schema.encodeUnknownEither(aggregate.output as Schema.Schema<unknown, unknown>)
              const rows = read.right.slice(offset, offset + limit).map((row) => Either.getOrElse(encode(row), () => null))
              return HttpServerResponse.unsafeJson({ name, total: read.right.length, offset, limit, rows })
            })
          }))
      },
      {
        method: "POST",
        path: "/_fw/inspect/aggregates/:name/refresh",
        capability: Capabilities.canRefreshAggregate,
        handler: Effect.flatMap(Plugin.RouteParams, (params) =>
          withScheduler((s) => {
            const name = params.name ?? ""
            if (!s.aggregates.some((a) => a.name === name)) {
              return Effect.succeed(HttpResponses.error(404, "AggregateNotFound", `no aggregate named "${name}" is registered`))
            }
            return Effect.gen(function*() {
              const outcome = yield* s.refresh(name)
              const meta = yield* s.meta(name)
              return HttpServerResponse.unsafeJson({ name, outcome, meta: metaJson(meta) })
            })
          }))
      }
    ]
  })
  const attach = Layer.scopedDiscard(Effect.flatMap(AggregateScheduler, (running) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        scheduler = running
      }),
      () => Effect.sync(() => {
        if (scheduler === running) scheduler = undefined
      })
    )))
  return { plugin, attach }
}
