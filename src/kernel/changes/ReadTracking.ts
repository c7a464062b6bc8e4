/**
 * Which tables a computation read: live queries re-run when one of them changes. Trackers nest:
 * a read counts for every enclosing `trackReads`.
 */
import type { Fiber } from "effect"
import { Effect, FiberRef } from "effect"

/** The sets of the trackers enclosing the current fiber, innermost last. */
const trackers = FiberRef.unsafeMake<ReadonlyArray<Set<string>>>([])

/** Runs `effect` and returns what it produced with the names of the tables it read (get, find, count, walk). */
export const trackReads = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<[A, ReadonlySet<string>], E, R> =>
  Effect.flatMap(FiberRef.get(trackers), (enclosing) => {
    const tables = new Set<string>()
    return Effect.map(
      Effect.locally(effect, trackers, [...enclosing, tables]),
      (a): [A, ReadonlySet<string>] => [a, tables]
    )
  })

/** Records that the computation running in `fiber` read `table` (synchronously, inside a fiber step). */
export const noteReadIn = (fiber: Fiber.RuntimeFiber<unknown, unknown>, table: string): void => {
  for (const set of fiber.getFiberRef(trackers)) set.add(table)
}

/** Records that the current computation read `table`. */
export const noteRead = (table: string): Effect.Effect<void> =>
  Effect.map(FiberRef.get(trackers), (sets) => {
    for (const set of sets) set.add(table)
  })
