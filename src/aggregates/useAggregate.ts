/**
 * `useAggregate(def)` (spec 4.2): the in-process handle of one aggregate. It reads the
 * `AggregateScheduler` of the fiber that runs it, so a procedure handler (whose effect may need no
 * service) calls it as it is: the aggregates plugin offers the scheduler to every guard and
 * handler. Elsewhere (a background job, a test) provide the scheduler layer; without one the read
 * is a defect naming what is missing.
 */
import { Effect, Option } from "effect"
import type { StoreUnavailable } from "../kernel/Errors.js"
import type * as Aggregate from "./Aggregate.js"
import { AggregateScheduler } from "./AggregateScheduler.js"
import type { AggregateSchedulerShape, Meta, Outcome } from "./AggregateScheduler.js"
import type { ReadOptions } from "./Read.js"
import type { AggregateNotFound, AggregateNotReady, AggregateStale } from "./Errors.js"

/** The handle of one aggregate. */
export interface Handle<A> {
  /**
   * Rows per the options; `AggregateStale` when `maxAgeMs` is given and the last refresh is older;
   * an incremental aggregate not built yet is waited for (`AggregateNotReady` if it cannot be).
   */
  readonly read: (
    options?: ReadOptions & { readonly orderBy?: keyof A & string }
  ) => Effect.Effect<ReadonlyArray<A>, AggregateStale | AggregateNotReady | AggregateNotFound | StoreUnavailable>
  /** `refreshedAt`, `rowCount`, `durationMs`, `lastError`, `nextRefreshAt` (spec 2.13). */
  readonly meta: () => Effect.Effect<Meta, AggregateNotFound | StoreUnavailable>
  /** A manual refresh: `skipped` when one is running. */
  readonly refresh: () => Effect.Effect<Outcome, AggregateNotFound>
}

const missing = "aggregates: no AggregateScheduler in this fiber (add the aggregates plugin and its attach layer to the app, or provide Aggregates.layerMemory / layerSql)"

const withScheduler = <A, E>(f: (scheduler: AggregateSchedulerShape) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.flatMap(Effect.serviceOption(AggregateScheduler), (scheduler) =>
    Option.isSome(scheduler) ? f(scheduler.value) : Effect.dieMessage(missing))

/** The handle of `aggregate`, served by the `AggregateScheduler` of the fiber that runs it. */
export const useAggregate = <A, I>(aggregate: Aggregate.Aggregate<A, I>): Handle<A> => ({
  read: (options) =>
    withScheduler((scheduler) => scheduler.read(aggregate.name, options)) as Effect.Effect<
      ReadonlyArray<A>,
      AggregateStale | AggregateNotReady | AggregateNotFound | StoreUnavailable
    >,
  meta: () => withScheduler((scheduler) => scheduler.meta(aggregate.name)),
  refresh: () => withScheduler((scheduler) => scheduler.refresh(aggregate.name))
})
