/**
 * `@fw/framework/react`: React hooks over `@fw/framework/client` (React is an optional peer
 * dependency). `useQuery` (live), `useMutation`, `useConnection`.
 */
export { useConnection, useMutation, useQuery } from "./Hooks.js"
export type { UseMutation } from "./Hooks.js"
