/**
 * Whether a computation committed anything to the store. A caller that must know if a failed
 * computation left writes behind (the idempotency binding: a retry may run again only when nothing
 * was committed) runs it under `witnessed`; the store marks the witness when a write commits, and
 * also when a COMMIT's outcome is unknown (`CommitUnknown`: it may have committed).
 *
 * The witness is a mutable cell shared with every fiber the computation forks (a FiberRef copies
 * the reference), so writes made on forked fibers count too. Raw SQL run past the `Store` is not seen.
 */
import type { Fiber } from "effect"
import { Effect, FiberRef } from "effect"

/** A witness: `committed` turns true at the first commit (or unknown commit) it sees. */
export interface Witness {
  committed: boolean
}

/** The witness of the running computation, if one is watching. */
export const current: FiberRef.FiberRef<Witness | undefined> = FiberRef.unsafeMake<Witness | undefined>(undefined)

/** Marks the current witness, if any: a write committed (or may have). */
export const mark: Effect.Effect<void> = Effect.map(FiberRef.get(current), (witness) => {
  if (witness !== undefined) witness.committed = true
})

/** `mark`, synchronously within `fiber` (inside a fiber step). */
export const markIn = (fiber: Fiber.RuntimeFiber<unknown, unknown>): void => {
  const witness = fiber.getFiberRef(current)
  if (witness !== undefined) witness.committed = true
}

/** A fresh witness that has seen nothing. */
export const make = (): Witness => ({ committed: false })

/** Runs `effect` watched by `witness`: read `witness.committed` once it has ended. */
export const watched = (witness: Witness) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, current, witness)
