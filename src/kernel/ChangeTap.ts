/**
 * ChangeTap: post-commit change events. Interface only in this file; see the layers below.
 */
import type { Cause, Effect, Queue, Scope } from "effect"
import { Context } from "effect"
import type { ChangeEvent } from "./ChangeEvent.js"
import type { ChangeDeliveryFailed, StoreUnavailable } from "./Errors.js"

/** A change recorded inside a transaction, before commit gives it a `seq`. */
export type PendingChange = Omit<ChangeEvent, "seq">

/** A subscriber of committed changes. */
export interface Listener {
  /** Used in logs and in `ChangeDeliveryFailed`. */
  readonly name: string
  /** Called once per committed change, in commit order. */
  readonly onEvent: (event: ChangeEvent) => Effect.Effect<void, unknown>
  /**
   * A durable listener must not lose events: when `onEvent` fails, `recordFailure` must record it
   * (for example into a drift ledger). If that fails too, the write that produced the event
   * fails with `ChangeDeliveryFailed` (its data is committed, but the caller is told loudly).
   * An ordinary listener's failure is logged and never affects the write.
   */
  readonly durable?: {
    readonly recordFailure: (event: ChangeEvent, cause: Cause.Cause<unknown>) => Effect.Effect<void, unknown>
  }
}

/** The change tap service. */
export interface ChangeTapShape {
  /** `local`: only the writing process sees its changes; `fleet`: every replica sees every change. */
  readonly scope: "local" | "fleet"
  /**
   * Called by the store inside the outermost transaction, just before commit. Under fleet
   * scope this writes the outbox rows and `pg_notify` on the transaction's connection.
   */
  readonly stage: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void, StoreUnavailable>
  /**
   * Called by the store after the outermost transaction committed: assigns `seq`, delivers to
   * every listener in order. Fails only when a durable listener could not record its failure.
   */
  readonly publish: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void, ChangeDeliveryFailed>
  /** Registers a listener for the lifetime of the scope. */
  readonly subscribe: (listener: Listener) => Effect.Effect<void, never, Scope.Scope>
  /**
   * A queue of every committed change (local ones and, under fleet scope, other replicas' ones),
   * subscribed immediately so nothing committed after this call is missed; unsubscribed with the scope.
   */
  readonly events: Effect.Effect<Queue.Dequeue<ChangeEvent>, never, Scope.Scope>
}

/** The change tap service tag. */
export class ChangeTap extends Context.Tag("@fw/framework/ChangeTap")<ChangeTap, ChangeTapShape>() {}
