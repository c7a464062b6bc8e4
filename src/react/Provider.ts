/**
 * `<FwProvider api={api}>`: the api the hooks below it read when none is passed, so they take the
 * spec's signatures (`useSearch(indexName)`, `useFlag(key)`, ...; spec 2.3, 4.2). A hook given an
 * api (`useFlag(api, key)`) ignores the provider: that form needs none.
 *
 * ```tsx
 * const api = mount({ apis: { main: { url: "/rpc" } } }).apis.main
 * createRoot(root).render(<FwProvider api={api}><App /></FwProvider>)
 * ```
 */
import { createContext, createElement, useContext } from "react"
import type { FunctionComponentElement, ProviderProps, ReactNode } from "react"
import type { Api, AreaError } from "../client/index.js"

// Widened to `AreaError`: the context cannot carry the api's own error type, and every area error
// is one (a tagged error with a message and a status), so a hook's `error` stays narrowable by `_tag`.
const FwContext = createContext<Api<AreaError> | undefined>(undefined)

/** The props of `FwProvider`. */
export interface FwProviderProps<E extends AreaError> {
  /** The api hooks below read: one of `mount(...).apis`. */
  readonly api: Api<E>
  readonly children?: ReactNode
}

/** Makes `api` the one every fw hook below reads when it is not given one. */
export const FwProvider = <E extends AreaError = never>(
  props: FwProviderProps<E>
): FunctionComponentElement<ProviderProps<Api<AreaError> | undefined>> =>
  createElement(FwContext.Provider, { value: props.api }, props.children)

/**
 * The api a hook works on: `api` when given, else the nearest `FwProvider`'s. Throws (a wiring
 * mistake, found on the first render) when there is neither.
 */
export const useApi = <E = never>(api?: Api<E>): Api<E | AreaError> => {
  // Called on every render whatever `api` is: hooks must run in the same order each time.
  const provided = useContext(FwContext)
  const chosen = api ?? provided
  if (chosen === undefined) {
    throw new Error("fw: no api for this hook: render it under <FwProvider api={...}>, or pass the api as the first argument")
  }
  return chosen
}
