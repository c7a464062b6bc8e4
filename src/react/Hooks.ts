/**
 * React hooks over the client's stores. They hold no state of their own: each reads a store of
 * `@fw/framework/client` through `useSyncExternalStore`, so the same store can back any other UI
 * library.
 *
 * Every hook has two forms with the same result. Under `<FwProvider api={api}>` it takes the
 * spec's signature (`useSearch("notes")`, `useFlag("beta")`, `useFlags()`; spec 2.3, 4.2); given an
 * api as its first argument (`useSearch(api, "notes")`, `useFlag(api, "beta")`) it needs no
 * provider, which is how a component talks to a second api. The provider forms type a failure as
 * any area error (`AreaError`, narrowable by `_tag`); the api forms by the errors the api was
 * mounted with.
 */
import { useMemo, useSyncExternalStore } from "react"
import type { Api, AreaError, ConnectionState, Contract, Input, LiveState, MutationState, Output } from "../client/index.js"
import * as Flags from "../client/Flags.js"
import * as Search from "../client/Search.js"
import { useApi } from "./Provider.js"

/** Whether `value` is an api rather than what a hook's first argument is otherwise (a contract, a key, a typed flag). */
const isApi = (value: unknown): value is Api<unknown> =>
  typeof value === "object" && value !== null && typeof (value as { readonly live?: unknown }).live === "function" &&
  typeof (value as { readonly call?: unknown }).call === "function"

/** A query contract (what `useQuery` reads). */
type QueryContract = Contract & { readonly kind: "query" }

/**
 * The live result of a query: subscribed while the component is mounted (shared with every other
 * component asking for the same query and input), re-rendered on every change.
 */
export function useQuery<P extends QueryContract>(query: P, input: Input<P>): LiveState<Output<P>, AreaError>
export function useQuery<P extends QueryContract, E = never>(api: Api<E>, query: P, input: Input<P>): LiveState<Output<P>, E>
export function useQuery<P extends QueryContract, E = never>(
  first: Api<E> | P,
  second: P | Input<P>,
  third?: Input<P>
): LiveState<Output<P>, E | AreaError> {
  const given = isApi(first)
  const api = useApi(given ? first as Api<E> : undefined)
  const query = (given ? second : first) as P
  const input = (given ? third : second) as Input<P>
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
export function useMutation<P extends Contract>(procedure: P): UseMutation<Input<P>, Output<P>, AreaError>
export function useMutation<P extends Contract, E = never>(api: Api<E>, procedure: P): UseMutation<Input<P>, Output<P>, E>
export function useMutation<P extends Contract, E = never>(first: Api<E> | P, second?: P): UseMutation<Input<P>, Output<P>, E | AreaError> {
  const given = isApi(first)
  const api = useApi(given ? first as Api<E> : undefined)
  const procedure = (given ? second : first) as P
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
export const useConnection = <E>(api?: Api<E>): ConnectionState => {
  const chosen = useApi(api)
  return useSyncExternalStore(chosen.connectionState.subscribe, chosen.connectionState.getSnapshot, chosen.connectionState.getSnapshot)
}

/**
 * The state of the caller's live flag set (`flags.evaluate`): `{status, data, error}`, for a UI
 * that shows loading or a refusal. `useFlags` is the set itself.
 */
export const useFlagsState = <E>(api?: Api<E>): LiveState<Flags.FlagSet, E | AreaError> => {
  const chosen = useApi(api)
  const live = useMemo(() => Flags.live(chosen), [chosen])
  return useSyncExternalStore(live.subscribe, live.getSnapshot, live.getSnapshot)
}

/**
 * The caller's flag set, a map of flag key to boolean (spec 4.2 `useFlags()`): empty until the
 * first result; re-renders when a flag is toggled or overridden on the server.
 */
export const useFlags = <E>(api?: Api<E>): Flags.FlagSet => Flags.flagSet(useFlagsState(api))

/** Whether the flag `key` is on for the caller: false until the first result and for an unknown key. */
export function useFlag(key: string): boolean
export function useFlag<E>(api: Api<E>, key: string): boolean
export function useFlag<E>(first: Api<E> | string, key?: string): boolean {
  const given = isApi(first)
  return Flags.isEnabled(useFlagsState(given ? first : undefined), given ? key! : first as string)
}

/**
 * The state of the caller's live variant set (`flags.variants`): `{status, data, error}`, with
 * every flag's served variant and every typed flag's encoded value. `useVariants` is the variants.
 */
export const useVariantsState = <E>(api?: Api<E>): LiveState<Flags.VariantSet, E | AreaError> => {
  const chosen = useApi(api)
  const live = useMemo(() => Flags.liveVariants(chosen), [chosen])
  return useSyncExternalStore(live.subscribe, live.getSnapshot, live.getSnapshot)
}

/**
 * The caller's served variants, a map of flag key to `{name, value, enabled}` (spec 4.2
 * `useVariants()`; a boolean flag serves `on` or `off`, a variant flag that is off without an
 * `offVariant` is absent): empty until the first result; re-renders on a toggle or an override.
 */
export const useVariants = <E>(api?: Api<E>): Flags.ServedVariants => Flags.served(useVariantsState(api))

/** The caller's served variant of `key`, `{name, value, enabled}`; undefined until the first result and when none is served. */
export function useVariant(key: string): Flags.Variant | undefined
export function useVariant<E>(api: Api<E>, key: string): Flags.Variant | undefined
export function useVariant<E>(first: Api<E> | string, key?: string): Flags.Variant | undefined {
  const given = isApi(first)
  return Flags.variant(useVariantsState(given ? first : undefined), given ? key! : first as string)
}

/** A typed flag's value for the caller, decoded through its schema; its `default` until the first result. */
export function useFlagValue<A, I>(flag: Flags.TypedFlagLike<A, I>): A
export function useFlagValue<A, I, E>(api: Api<E>, flag: Flags.TypedFlagLike<A, I>): A
export function useFlagValue<A, I, E>(first: Api<E> | Flags.TypedFlagLike<A, I>, flag?: Flags.TypedFlagLike<A, I>): A {
  const given = isApi(first)
  return Flags.value(useVariantsState(given ? first : undefined), given ? flag! : first as Flags.TypedFlagLike<A, I>)
}

/** What `useSearch` returns: the state of the last run (`results`, `facets`, `pending`, `error`, ...) and `run`. */
export interface UseSearch<E = never> extends Search.SearchState<E> {
  /** Issues the query; the answer lands in the state (only the latest run's). */
  readonly run: (q: string, options?: Search.RunOptions) => Promise<void>
}

/**
 * Search over the index `indexName` (`search.query`, spec 2.3): `run(q, {limit, offset}?)` issues
 * the query, the hook re-renders with its hit documents (`results`) and facet counts (`facets`),
 * and `pending` says a run is in flight. `options` (facets, filters, highlight, ...) apply to every
 * run; an equal `options` object on the next render keeps the store.
 */
export function useSearch(indexName: string, options?: Search.SearchOptions): UseSearch<AreaError>
export function useSearch<E>(api: Api<E>, indexName: string, options?: Search.SearchOptions): UseSearch<E>
export function useSearch<E>(
  first: Api<E> | string,
  second?: string | Search.SearchOptions,
  third?: Search.SearchOptions
): UseSearch<E | AreaError> {
  const given = isApi(first)
  const api = useApi(given ? first as Api<E> : undefined)
  const index = (given ? second : first) as string
  const options = ((given ? third : second) ?? {}) as Search.SearchOptions
  const optionsKey = JSON.stringify(options)
  const store = useMemo(() => Search.make(api, index, options), [api, index, optionsKey])
  const state = useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot)
  return useMemo(() => ({ ...state, run: store.run }), [state, store])
}
