/**
 * The subscribers of one registry (transitions, budget crossings, experiment updates).
 */
import type { Scope } from "effect"
import { Effect } from "effect"

/** Subscribers kept in a plain array: the per-change path checks for them without running an effect. */
export interface Listeners<A> {
  /** Adds a listener for the lifetime of the scope. */
  readonly subscribe: (listener: (value: A) => Effect.Effect<void>) => Effect.Effect<void, never, Scope.Scope>
  /** Whether any listener is subscribed (checked synchronously). */
  readonly any: () => boolean
  /** Tells every listener every value, in order; a listener's failure is logged, never raised. */
  readonly notify: (values: ReadonlyArray<A>) => Effect.Effect<void>
}

/** A new set of listeners. */
export const make = <A>(): Effect.Effect<Listeners<A>> =>
  Effect.sync(() => {
    let all: ReadonlyArray<(value: A) => Effect.Effect<void>> = []
    return {
      subscribe: (listener: (value: A) => Effect.Effect<void>): Effect.Effect<void, never, Scope.Scope> =>
        Effect.acquireRelease(
          Effect.sync(() => {
            all = [...all, listener]
          }),
          () =>
            Effect.sync(() => {
              all = all.filter((l) => l !== listener)
            })
        ),
      any: () => all.length > 0,
      notify: (values: ReadonlyArray<A>): Effect.Effect<void> =>
        values.length === 0 || all.length === 0 ? Effect.void : Effect.forEach(all, (listener) =>
          Effect.forEach(values, (value) =>
            listener(value).pipe(Effect.catchAllCause((cause) => Effect.logWarning("a standing listener failed", cause)))
          , { discard: true }), { discard: true })
    }
  })
