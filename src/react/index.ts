/**
 * `@fw/framework/react`: React hooks over `@fw/framework/client` (React is an optional peer
 * dependency). `useQuery` (live), `useMutation`, `useConnection`, `useFlags`, `useFlag`.
 */
export { useConnection, useFlag, useFlags, useMutation, useQuery } from "./Hooks.js"
export type { UseMutation } from "./Hooks.js"
