/**
 * The `flags.variants` query (spec 4.2 client hooks `useVariant`, `useVariants`, `useFlagValue`):
 * the caller's served variant of every flag and the value of every typed flag, live over the
 * socket like `flags.evaluate`, so a toggle or override pushes the new set. A bulk delivery: it
 * never counts as flag usage (spec 2.11), so the registry is read without a usage source.
 */
import { Clock, Effect, Either, Schema } from "effect"
import * as Procedure from "../app/Procedure.js"
import { noteRead } from "../kernel/changes/ReadTracking.js"
import type { FlagRegistryShape } from "./FlagRegistry.js"
import type * as TypedFlag from "./TypedFlag.js"

/** The tag of the query. */
export const variantsTag = "flags.variants"

/** A served variant, `{name, value, enabled}` (a boolean flag yields `on` or `off`). */
export const Variant = Schema.Struct({ name: Schema.String, value: Schema.Unknown, enabled: Schema.Boolean })

/**
 * The output: `variants` maps every flag key to its served variant (null when a variant flag
 * evaluates off without an `offVariant`); `values` maps every typed flag key to its value, encoded
 * through the flag's schema (the client decodes it with the same `defineFlag` result).
 */
export const Output = Schema.Struct({
  variants: Schema.Record({ key: Schema.String, value: Schema.NullOr(Variant) }),
  values: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})
/** @see Output */
export type Output = typeof Output.Type

/** The `flags.variants` query of a registry and its typed flags. */
export const make = (registry: FlagRegistryShape, typedFlags: ReadonlyArray<TypedFlag.Any>) =>
  Procedure.query(variantsTag, {
    input: Schema.Struct({}),
    output: Output,
    handler: (_input, ctx) =>
      Effect.zipRight(
        noteRead(registry.sourceName),
        Effect.map(Clock.currentTimeMillis, (now): Output => {
          const variants: Record<string, typeof Variant.Type | null> = {}
          // No usage source: client reads never count (spec 2.11).
          for (const key of registry.keys) variants[key] = registry.variantSync(key, ctx.subject, now)
          const values: Record<string, unknown> = {}
          for (const flag of typedFlags) {
            const encoded = Schema.encodeUnknownEither(flag.schema)(registry.valueSync(flag, ctx.subject, now))
            // A value that does not encode is left out: the client falls back to the flag's default.
            if (Either.isRight(encoded)) values[flag.key] = encoded.right
          }
          return { variants, values }
        })
      )
  })
