/**
 * The caller's feature flags in the browser, framework-agnostic: the live `flags.evaluate` query of
 * the flags plugin (spec 4.2), so a toggle on the server pushes the new set and every binding
 * re-renders. Client reads never count as flag usage (spec 2.11): the query is a bulk delivery.
 *
 * ```ts
 * const flags = Flags.live(api)
 * const stop = flags.subscribe(() => render(Flags.isEnabled(flags.getSnapshot(), "beta")))
 * ```
 */
import { Schema } from "effect"
import type { Api, LiveQuery, LiveState } from "./Api.js"

/** The handler-less contract of the flags plugin's `flags.evaluate` query. */
export const evaluate = {
  tag: "flags.evaluate",
  kind: "query",
  input: Schema.Struct({}),
  output: Schema.Record({ key: Schema.String, value: Schema.Boolean })
} as const

/** The caller's flag set: key → enabled. */
export type FlagSet = Readonly<Record<string, boolean>>

/** The live flag set of `api` (shared with every other reader of the same api). */
export const live = (api: Api): LiveQuery<FlagSet> => api.live(evaluate, {})

/** Whether `key` is on in `state`: false until the first result, for an unknown key, and after a refusal. */
export const isEnabled = (state: LiveState<FlagSet>, key: string): boolean => state.data?.[key] === true
