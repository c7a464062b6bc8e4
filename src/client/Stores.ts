/**
 * The stores a UI reads: `getSnapshot()` and `subscribe(listener)` (the shape React's
 * `useSyncExternalStore` takes) over a connection, a live query or a mutation.
 */
import type { ClientError } from "./Errors.js"

/** A readable, subscribable piece of state. `getSnapshot` returns the same object until it changes. */
export interface Readable<A> {
  readonly getSnapshot: () => A
  readonly subscribe: (listener: () => void) => () => void
}

/** The connection of one api. */
export interface ConnectionState {
  readonly status: "idle" | "connecting" | "open" | "reconnecting" | "closed"
  /** Failed connects since the last successful one. */
  readonly attempt: number
  /** Why the last connect failed or the connection dropped. */
  readonly error: ClientError | undefined
}

/** The state of a live query (`E`: the area errors the client was given). */
export interface LiveState<O, E = never> {
  /**
   * `connecting` until the first result; `live` while results stream; `reconnecting` while the
   * connection is re-established (the last data is kept); `error` after a refusal (retried on the
   * next connect).
   */
  readonly status: "connecting" | "live" | "reconnecting" | "error"
  readonly data: O | undefined
  readonly error: ClientError<E> | undefined
}

/** A live query: its state, subscribed while it has listeners. */
export interface LiveQuery<O, E = never> extends Readable<LiveState<O, E>> {
  readonly key: string
}

/** The state of a mutation store. */
export interface MutationState<O, E = never> {
  readonly status: "idle" | "pending" | "success" | "error"
  readonly data: O | undefined
  readonly error: ClientError<E> | undefined
}

/** A mutation (or action) with its last run's state. */
export interface Mutation<I, O, E = never> extends Readable<MutationState<O, E>> {
  /** Runs it; resolves with the output or rejects with a `ClientError` (also kept in the state). */
  readonly run: (input: I) => Promise<O>
  readonly reset: () => void
}
