/**
 * The live state of one flag in the registry: its code definition, the override patching it, the
 * resolved flag both make, and what derives from that whenever it changes (the evaluator compiled
 * for the hot path, typed variant values, usage counters). An override is built here and refused
 * whole when the result is not a valid flag or its variant values fail the flag's value schema.
 */
import { Either, Schema } from "effect"
import * as Compile from "./Compile.js"
import * as Definition from "./Definition.js"
import * as Experiments from "./Experiments.js"
import * as TypedFlag from "./TypedFlag.js"
import type * as Usage from "./Usage.js"

/** An override: the fields it names patch the code definition. */
export type Override = Readonly<Record<string, unknown>>

/** One flag of the registry. */
export interface Entry {
  readonly key: string
  readonly base: Definition.Flag
  readonly typed: TypedFlag.Any | undefined
  /** The experiment this flag feeds: every override must keep serving exactly its arms (refusal 4). */
  readonly experiment: Experiments.ExperimentLike | undefined
  resolved: Definition.Resolved
  override: Override | undefined
  version: number
  /** Typed flags: each variant's value decoded through the schema. */
  decoded: ReadonlyMap<string, unknown>
  /** `resolved` compiled for the hot path (recompiled with it). */
  evaluate: Compile.Evaluator
  /** Whether the answer depends on the time (`resolved.timed`). */
  timed: boolean
  /** Usage counters by source, kept here so a counted read does no lookup. */
  readonly counters: Partial<Record<Usage.Source, Usage.Counter>>
}

const decodeVariants = (typed: TypedFlag.Any | undefined, resolved: Definition.Resolved): ReadonlyMap<string, unknown> => {
  if (typed === undefined) return new Map()
  const decode = Schema.decodeUnknownSync(typed.schema)
  return new Map(resolved.variants.map((variant) => [variant.name, decode(variant.value)]))
}

/** A flag as defined in code, with no override yet. Throws `FlagDefinitionError` for an invalid definition. */
export const make = (
  key: string,
  base: Definition.Flag,
  typed: TypedFlag.Any | undefined,
  experiment?: Experiments.ExperimentLike
): Entry => {
  const resolved = Definition.resolve(key, base)
  return {
    key,
    base,
    typed,
    experiment,
    resolved,
    override: undefined,
    version: 0,
    decoded: decodeVariants(typed, resolved),
    evaluate: Compile.compile(resolved),
    timed: resolved.timed,
    counters: {}
  }
}

/** Installs a resolved flag and what derives from it (typed variant values, the compiled evaluator). */
export const install = (entry: Entry, resolved: Definition.Resolved, override: Override | undefined, version: number) => {
  entry.resolved = resolved
  entry.override = override
  entry.version = version
  entry.decoded = decodeVariants(entry.typed, resolved)
  entry.evaluate = Compile.compile(resolved)
  entry.timed = resolved.timed
}

/** A flag built from its code definition and an override. */
export interface Built {
  readonly resolved: Definition.Resolved
  readonly override: Override | undefined
}

/** The flag `override` makes of the code definition; Left: why it is refused whole. */
export const candidate = (entry: Entry, override: Override | undefined): Either.Either<Built, string> => {
  if (override === undefined) return Either.right({ resolved: Definition.resolve(entry.key, entry.base), override: undefined })
  try {
    let patch = override
    if (entry.typed !== undefined && override.variants !== undefined) {
      if (!Array.isArray(override.variants)) return Either.left("variants must be a list of {name, value, weight?}")
      const encoded = TypedFlag.encodeVariants(entry.typed.schema, override.variants)
      if (Either.isLeft(encoded)) return Either.left(encoded.left)
      patch = { ...override, variants: encoded.right }
    }
    const resolved = Definition.patch(entry.key, entry.base, patch)
    const differ = entry.experiment === undefined
      ? undefined
      : Experiments.armsDiffer(entry.experiment, resolved.variants.map((variant) => variant.name))
    if (differ !== undefined) return Either.left(differ)
    return Either.right({ resolved, override: patch })
  } catch (error) {
    return Either.left(error instanceof Error ? error.message : String(error))
  }
}

/** What an audit row and a `Change` show of a flag before and after. */
export const snapshotOf = (resolved: Definition.Resolved): Record<string, unknown> => ({
  enabled: resolved.enabled,
  rollout: resolved.rollout
})
