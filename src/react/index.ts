/**
 * `@fw/framework/react`: React hooks over `@fw/framework/client` (React is an optional peer
 * dependency). `useQuery` (live), `useMutation`, `useConnection`, `useSearch`, and the flag hooks
 * `useFlags`, `useFlag`, `useVariants`, `useVariant`, `useFlagValue`.
 */
export {
  useConnection,
  useFlag,
  useFlags,
  useFlagValue,
  useMutation,
  useQuery,
  useSearch,
  useVariant,
  useVariants
} from "./Hooks.js"
export type { UseMutation, UseSearch } from "./Hooks.js"
