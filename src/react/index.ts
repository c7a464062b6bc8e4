/**
 * `@fw/framework/react`: React hooks over `@fw/framework/client` (React is an optional peer
 * dependency). Under `<FwProvider api={api}>` the hooks take the spec's signatures: `useSearch`
 * (`useSearch(indexName)`), the flag hooks `useFlags()`, `useFlag(key)`, `useVariants()`,
 * `useVariant(key)`, `useFlagValue(typedFlag)`, and `useQuery` (live), `useMutation`,
 * `useConnection`. Each also takes an api as its first argument, with no provider needed.
 */
export { FwProvider, useApi } from "./Provider.js"
export type { FwProviderProps } from "./Provider.js"
export {
  useConnection,
  useFlag,
  useFlags,
  useFlagsState,
  useFlagValue,
  useMutation,
  useQuery,
  useSearch,
  useVariant,
  useVariants,
  useVariantsState
} from "./Hooks.js"
export type { UseMutation, UseSearch } from "./Hooks.js"
