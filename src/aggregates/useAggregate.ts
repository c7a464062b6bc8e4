/**
 * `useAggregate(def)` (spec 4.2): the in-process handle of one aggregate.
 */
import { Effect } from "effect"
import type { StoreUnavailable } from "../kernel/Errors.js"
import type * as Aggregate from "./Aggregate.js"
import { AggregateScheduler } from "./AggregateScheduler.js"
import type { Meta, Outcome } from "./AggregateScheduler.js"
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
  ) => Effect.Effect<ReadonlyArray<A>, AggregateStale | AggregateNotReady | AggregateNotFound | StoreUnavailable, AggregateScheduler>
  readonly meta: () => Effect.Effect<Meta, AggregateNotFound | StoreUnavailable, AggregateScheduler>
  /** A manual refresh: `skipped` when one is running. */
  readonly refresh: () => Effect.Effect<Outcome, AggregateNotFound, AggregateScheduler>
}

/** The handle of `aggregate` (served by the `AggregateScheduler` in context). */
export const useAggregate = <A, I>(aggregate: Aggregate.Aggregate<A, I>): Handle<A> => ({
  read: (options) =>
    Effect.flatMap(AggregateScheduler, (scheduler) => scheduler.read(aggregate.name, options)) as Effect.Effect<
      ReadonlyArray<A>,
      AggregateStale | AggregateNotReady | AggregateNotFound | StoreUnavailable,
      AggregateScheduler
    >,
  meta: () => Effect.flatMap(AggregateScheduler, (scheduler) => scheduler.meta(aggregate.name)),
  refresh: () => Effect.flatMap(AggregateScheduler, (scheduler) => scheduler.refresh(aggregate.name))
})
