/**
 * Inspect routes of spec 4.1: a snapshot of every aggregate with its metadata, and a manual
 * refresh, at the spec's paths `GET /_fw/inspect/aggregates` and
 * `POST /_fw/inspect/aggregates/<name>/refresh` (the plugin's own absolute inspect path), gated like
 * every inspect route; the refresh needs the `canRefreshAggregate` capability.
 *
 * The routes reach the scheduler through `attach`, a layer composed with the scheduler layer.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import * as Capabilities from "../app/Capabilities.js"
import * as Dashboard from "./dashboard.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as Plugin from "../app/Plugin.js"
import type * as Aggregate from "./Aggregate.js"
import { AggregateScheduler } from "./AggregateScheduler.js"
import type { AggregateSchedulerShape, Meta } from "./AggregateScheduler.js"
import { tables } from "./tables.js"

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

/** Builds the aggregates plugin: its `_fw_aggregate_*` tables and the inspect routes. */
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
