/**
 * The analytics sink an aggregate build reads (`ctx.analytics`, spec 2.13): `topN`, `aggregate`,
 * `timeseries` and `track`. The default provider is `noop`: it drops `track` and fails every read
 * with `AnalyticsCapabilityNotSupported`, which the refresh records as its error.
 */
import type { Effect } from "effect"
import { Context, Effect as E, Layer } from "effect"
import { AnalyticsCapabilityNotSupported } from "./Errors.js"

/** A time window in epoch ms. */
export interface Window {
  readonly from?: number
  readonly to?: number
}

/** The analytics sink. */
export interface AnalyticsShape {
  readonly provider: string
  /** The `n` most frequent values of `by` among `event` events. */
  readonly topN: (options: { readonly event: string; readonly by: string; readonly n: number } & Window) => Effect.Effect<
    ReadonlyArray<{ readonly key: string; readonly count: number }>,
    AnalyticsCapabilityNotSupported
  >
  /** One aggregate (`count`, `sum`, `avg`, `min`, `max`) over `event` events. */
  readonly aggregate: (
    options: { readonly event: string; readonly op: "count" | "sum" | "avg" | "min" | "max"; readonly property?: string } & Window
  ) => Effect.Effect<number, AnalyticsCapabilityNotSupported>
  /** Event counts per bucket of `bucketMs`. */
  readonly timeseries: (options: { readonly event: string; readonly bucketMs: number } & Window) => Effect.Effect<
    ReadonlyArray<{ readonly at: number; readonly value: number }>,
    AnalyticsCapabilityNotSupported
  >
  /** Records an event. */
  readonly track: (event: string, properties?: Readonly<Record<string, unknown>>) => Effect.Effect<void>
}

/** The analytics sink service. */
export class Analytics extends Context.Tag("@fw/framework/aggregates/Analytics")<Analytics, AnalyticsShape>() {}

const unsupported = (capability: string) => E.fail(new AnalyticsCapabilityNotSupported({ provider: "noop", capability }))

/** The `noop` provider: reads fail `AnalyticsCapabilityNotSupported`, `track` is dropped. */
export const noop: AnalyticsShape = {
  provider: "noop",
  topN: () => unsupported("topN"),
  aggregate: () => unsupported("aggregate"),
  timeseries: () => unsupported("timeseries"),
  track: () => E.void
}

/** Provides the `noop` provider (the default when no `Analytics` is provided). */
export const layerNoop: Layer.Layer<Analytics> = Layer.succeed(Analytics, noop)
