/**
 * `@fw/framework/aggregates`: scheduled and incremental materialised queries (spec 2.13, 3.7).
 */
import { Effect } from "effect"
import { isAggregate } from "./Aggregate.js"
import type { Any } from "./Aggregate.js"
import * as Discovery from "./Discovery.js"

export { defineAggregate, isAggregate, parseCron, parseInterval } from "./Aggregate.js"
export type { Aggregate, Any, BuildContext, BuildResult, Incremental, Op, Options, Policy, Refresh } from "./Aggregate.js"
export { AggregateScheduler, layerMemory, layerSql } from "./AggregateScheduler.js"
export type { AggregateSchedulerShape, Meta, Options as SchedulerOptions, Outcome } from "./AggregateScheduler.js"
export { select } from "./Read.js"
export type { ReadOptions } from "./Read.js"
export { Analytics, layerNoop as analyticsNoop, noop as noopAnalytics } from "./Analytics.js"
export type { AnalyticsShape } from "./Analytics.js"
export { DiscoveryFailed, discover, findFiles } from "./Discovery.js"
export {
  AggregateBootFailed,
  AggregateDefinitionError,
  AggregateNotFound,
  AggregateNotReady,
  AggregateStale,
  AnalyticsCapabilityNotSupported
} from "./Errors.js"
export { aggregatesPlugin } from "./inspect.js"
export type { AggregatesPlugin } from "./inspect.js"
export { AggregateMeta, AggregateRows, tables } from "./tables.js"
export { useAggregate } from "./useAggregate.js"
export type { Handle } from "./useAggregate.js"

/** The `*.aggregate.ts` files under `root` (the app entry's folder): their `defineAggregate` default exports. */
export const discoverAggregates = (root: string): Effect.Effect<ReadonlyArray<Any>, Discovery.DiscoveryFailed> =>
  Effect.map(Discovery.discover(root, ".aggregate.ts", isAggregate, "defineAggregate"), (found) => found.map((f) => f.value))

