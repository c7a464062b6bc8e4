/**
 * The caller's feature flags in the browser, framework-agnostic: the live `flags.evaluate` and
 * `flags.variants` queries of the flags plugin (spec 4.2), so a toggle on the server pushes the
 * new set and every binding re-renders. Client reads never count as flag usage (spec 2.11): both
 * queries are bulk deliveries.
 *
 * ```ts
 * const flags = Flags.live(api)
 * const stop = flags.subscribe(() => render(Flags.isEnabled(flags.getSnapshot(), "beta")))
 * const variants = Flags.liveVariants(api)
 * variants.subscribe(() => render(Flags.variant(variants.getSnapshot(), "checkout")?.name))
 * ```
 */
import { Either, Schema } from "effect"
import type { Api } from "./Api.js"
import type { LiveQuery, LiveState } from "./Stores.js"

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
export const live = <E>(api: Api<E>): LiveQuery<FlagSet, E> => api.live(evaluate, {})

/** Whether `key` is on in `state`: false until the first result, for an unknown key, and after a refusal. */
export const isEnabled = <E>(state: LiveState<FlagSet, E>, key: string): boolean => state.data?.[key] === true

const noFlags: FlagSet = Object.freeze({})

/** The flag set of `state`: empty until the first result (the same object until it changes). */
export const flagSet = <E>(state: LiveState<FlagSet, E>): FlagSet => state.data ?? noFlags

/** A served variant (spec 2.11): a boolean flag yields `on` or `off`; `value` is JSON. */
export interface Variant {
  readonly name: string
  readonly value: unknown
  readonly enabled: boolean
}

const VariantSchema = Schema.Struct({ name: Schema.String, value: Schema.Unknown, enabled: Schema.Boolean })

/**
 * The handler-less contract of the flags plugin's `flags.variants` query: every flag's served
 * variant (null for a variant flag that is off without an `offVariant`) and every typed flag's
 * value, encoded through its schema.
 */
export const variants = {
  tag: "flags.variants",
  kind: "query",
  input: Schema.Struct({}),
  output: Schema.Struct({
    variants: Schema.Record({ key: Schema.String, value: Schema.NullOr(VariantSchema) }),
    values: Schema.Record({ key: Schema.String, value: Schema.Unknown })
  })
} as const

/** The caller's variants and typed values, as `flags.variants` delivers them. */
export type VariantSet = Schema.Schema.Type<typeof variants.output>

/** The live variant set of `api` (shared with every other reader of the same api). */
export const liveVariants = <E>(api: Api<E>): LiveQuery<VariantSet, E> => api.live(variants, {})

/** The served variant of `key`: undefined until the first result, for an unknown key, after a refusal and when none is served. */
export const variant = <E>(state: LiveState<VariantSet, E>, key: string): Variant | undefined =>
  state.data?.variants[key] ?? undefined

/** The caller's served variants by key (a variant flag that is off without an `offVariant` serves none, and is absent). */
export type ServedVariants = Readonly<Record<string, Variant>>

const noVariants: ServedVariants = Object.freeze({})
// Per delivered set, so the map keeps its identity until the set changes (a UI re-renders only then).
const servedCache = new WeakMap<object, ServedVariants>()

/** Every served variant of `state`: empty until the first result (the same object until it changes). */
export const served = <E>(state: LiveState<VariantSet, E>): ServedVariants => {
  const data = state.data
  if (data === undefined) return noVariants
  let out = servedCache.get(data)
  if (out === undefined) {
    const entries: Array<[string, Variant]> = []
    for (const [key, variant] of Object.entries(data.variants)) if (variant !== null) entries.push([key, variant])
    out = Object.freeze(Object.fromEntries(entries))
    servedCache.set(data, out)
  }
  return out
}

/**
 * What the client needs of a typed flag: its key, value schema and default (a `defineFlag`
 * result is one; the browser may import it from a module shared with the server, or declare the
 * same three fields).
 */
export interface TypedFlagLike<A, I = A> {
  readonly key: string
  readonly schema: Schema.Schema<A, I>
  readonly default: A
}

// Decoded values per delivered set, so a value keeps its identity until the set changes.
const decodedCache = new WeakMap<object, Map<object, unknown>>()

/**
 * The typed value of `flag` in `state`, decoded through its schema: the flag's `default` until the
 * first result, after a refusal, for a flag the server does not declare as typed, and for a value
 * that does not decode (client and server disagree on the schema).
 */
export const value = <A, I, E>(state: LiveState<VariantSet, E>, flag: TypedFlagLike<A, I>): A => {
  const data = state.data
  if (data === undefined || !Object.hasOwn(data.values, flag.key)) return flag.default
  let cache = decodedCache.get(data)
  if (cache === undefined) {
    cache = new Map()
    decodedCache.set(data, cache)
  }
  if (cache.has(flag)) return cache.get(flag) as A
  const decoded = Schema.decodeUnknownEither(flag.schema)(data.values[flag.key])
  const out = Either.isRight(decoded) ? decoded.right : flag.default
  cache.set(flag, out)
  return out
}
