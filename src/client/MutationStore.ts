/**
 * The store of a mutation (or action): `run(input)` plus the state of its last run, over any
 * function that runs it once (an `Api`'s `call`). Only the latest run lands in the state, so a
 * slower earlier run never overwrites a newer one.
 */
import type { ClientError } from "./Errors.js"
import type { Mutation, MutationState } from "./Stores.js"

/** A mutation store whose runs go through `run` (which rejects with a `ClientError<E>`). */
export const make = <I, O, E>(run: (input: I) => Promise<O>): Mutation<I, O, E> => {
  let state: MutationState<O, E> = { status: "idle", data: undefined, error: undefined }
  const listeners = new Set<() => void>()
  const set = (next: MutationState<O, E>) => {
    state = next
    for (const listener of [...listeners]) listener()
  }
  let latest = 0
  return {
    getSnapshot: () => state,
    subscribe: (listener) => {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    reset: () => set({ status: "idle", data: undefined, error: undefined }),
    run: (input) => {
      const current = ++latest
      set({ status: "pending", data: state.data, error: undefined })
      return run(input).then(
        (data) => {
          if (current === latest) set({ status: "success", data, error: undefined })
          return data
        },
        (error: ClientError<E>) => {
          if (current === latest) set({ status: "error", data: undefined, error })
          throw error
        }
      )
    }
  }
}
