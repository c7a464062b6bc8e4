/**
 * React hooks over the client's stores. They hold no state of their own: each reads a store of
 * `@fw/framework/client` through `useSyncExternalStore`, so the same store can back any other UI
 * library.
 */
import { useMemo, useSyncExternalStore } from "react"
import type { Api, ConnectionState, Contract, Input, LiveState, MutationState, Output } from "../client/index.js"
import * as Flags from "../client/Flags.js"
import * as Search from "../client/Search.js"

/**
 * The live result of a query: subscribed while the component is mounted (shared with every other
 * component asking for the same query and input), re-rendered on every change.
 */
export const useQuery = <P extends Contract & { readonly kind: "query" }, E = never>(
  api: Api<E>,
  query: P,
  input: Input<P>
): LiveState<Output<P>, E> => {
  const fresh = api.live(query, input)
  // One store per (api, procedure, input): an equal input on the next render keeps the subscription.
  const live = useMemo(() => fresh, [api, fresh.key])
  return useSyncExternalStore(live.subscribe, live.getSnapshot, live.getSnapshot)
}

/** What `useMutation` returns: the state of the last run, and ways to run it. */
export interface UseMutation<I, O, E = never> extends MutationState<O, E> {
  /** Runs it; the result and any error land in the state (nothing to catch). */
  readonly mutate: (input: I) => void
  /** Runs it and resolves with the output, or rejects with the `ClientError`. */
  readonly run: (input: I) => Promise<O>
  readonly reset: () => void
}

/** A mutation (or action) with the state of its last run. */
export const useMutation = <P extends Contract, E = never>(api: Api<E>, procedure: P): UseMutation<Input<P>, Output<P>, E> => {
  const mutation = useMemo(() => api.mutation(procedure), [api, procedure.tag])
  const state = useSyncExternalStore(mutation.subscribe, mutation.getSnapshot, mutation.getSnapshot)
  return useMemo(() => ({
    ...state,
    mutate: (input: Input<P>) => {
      mutation.run(input).catch(() => undefined)
    },
    run: mutation.run,
    reset: mutation.reset
  }), [state, mutation])
}

/** The api's connection state (`open`, `reconnecting`, ...), for a status indicator. */
export const useConnection = <E>(api: Api<E>): ConnectionState =>
  useSyncExternalStore(api.connectionState.subscribe, api.connectionState.getSnapshot, api.connectionState.getSnapshot)

/** The caller's live flag set (`flags.evaluate`): re-renders when a flag is toggled on the server. */
export const useFlags = <E>(api: Api<E>): LiveState<Flags.FlagSet, E> => {
  const live = useMemo(() => Flags.live(api), [api])
  return useSyncExternalStore(live.subscribe, live.getSnapshot, live.getSnapshot)
}

/** Whether the flag `key` is on for the caller (false until the first result and for an unknown key). */
export const useFlag = <E>(api: Api<E>, key: string): boolean => Flags.isEnabled(useFlags(api), key)

/** The caller's live variants and typed values (`flags.variants`): re-renders on a toggle or override. */
export const useVariants = <E>(api: Api<E>): LiveState<Flags.VariantSet, E> => {
  const live = useMemo(() => Flags.liveVariants(api), [api])
  return useSyncExternalStore(live.subscribe, live.getSnapshot, live.getSnapshot)
}

/** The caller's served variant of `key`, `{name, value, enabled}`; undefined until the first result and when none is served. */
export const useVariant = <E>(api: Api<E>, key: string): Flags.Variant | undefined => Flags.variant(useVariants(api), key)

/** A typed flag's value for the caller, decoded through its schema; its `default` until the first result. */
export const useFlagValue = <A, I, E>(api: Api<E>, flag: Flags.TypedFlagLike<A, I>): A => Flags.value(useVariants(api), flag)

/** What `useSearch` returns: the state of the last run (`results`, `facets`, `pending`, `error`, ...) and `run`. */
export interface UseSearch<E = never> extends Search.SearchState<E> {
  /** Issues the query; the answer lands in the state (only the latest run's). */
  readonly run: (q: string, options?: Search.RunOptions) => Promise<void>
}

/**
 * Search over `index` (`search.query`): `run(q, {limit, offset}?)` issues the query, the hook
 * re-renders with its hit documents and facet counts. `options` (facets, filters, highlight, ...)
 * apply to every run; an equal `options` object on the next render keeps the store.
 */
export const useSearch = <E>(api: Api<E>, index: string, options: Search.SearchOptions = {}): UseSearch<E> => {
  const optionsKey = JSON.stringify(options)
  const store = useMemo(() => Search.make(api, index, options), [api, index, optionsKey])
  const state = useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot)
  return useMemo(() => ({ ...state, run: store.run }), [state, store])
}
