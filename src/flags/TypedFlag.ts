/**
 * `defineFlag`: a flag whose value has a schema. The authored default is decoded at declaration and
 * every variant value must satisfy the schema; `flagValue` then returns a typed value.
 */
import { Either, ParseResult, Schema } from "effect"
import type { FlagObject, Json, Variant } from "./Definition.js"
import * as Definition from "./Definition.js"
import { FlagDefinitionError } from "./Errors.js"

/**
 * The link from a flag to the experiment that reads the arm it served (spec 2.14 `variantFrom`).
 * This is the seam for refusal 4 of spec 7.1: `flagsPlugin` checks it against the experiments it is
 * given through `ExperimentLike` (see `Experiments.ts`).
 */
export interface ExperimentLink {
  /** The experiment's `name`. */
  readonly name: string
}

/** Options of `defineFlag`: the value schema, the default, optional variants and the other fields of 2.11. */
export interface Options<A, I> extends Omit<FlagObject<A>, "variants"> {
  readonly key: string
  readonly value: Schema.Schema<A, I>
  /** The value type comes from the schema alone. */
  readonly default: NoInfer<A>
  readonly variants?: ReadonlyArray<Variant<NoInfer<A>>>
  readonly experiment?: ExperimentLink | string
}

/** A typed flag. */
export interface TypedFlag<A, I = A> {
  readonly _tag: "TypedFlag"
  readonly key: string
  readonly schema: Schema.Schema<A, I>
  readonly default: A
  /** The flag as the registry holds it (variant values encoded to JSON). */
  readonly definition: FlagObject
  readonly experiment: ExperimentLink | undefined
}

/** Any typed flag. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Any = TypedFlag<any, any>

const describe = (error: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(error)

/**
 * Checks each variant value against `schema` and encodes it to JSON. Left: the first failure, in words.
 */
export const encodeVariants = <A, I>(
  schema: Schema.Schema<A, I>,
  variants: ReadonlyArray<{ readonly name: string; readonly value: unknown; readonly weight?: number }>
): Either.Either<ReadonlyArray<Variant>, string> => {
  const validate = Schema.validateEither(schema)
  const encode = Schema.encodeEither(schema)
  const out: Array<Variant> = []
  for (const variant of variants) {
    const checked = validate(variant.value)
    if (Either.isLeft(checked)) return Either.left(`variant "${variant.name}" fails the value schema: ${describe(checked.left)}`)
    const encoded = encode(checked.right)
    if (Either.isLeft(encoded)) return Either.left(`variant "${variant.name}" cannot be encoded: ${describe(encoded.left)}`)
    out.push({ name: variant.name, value: encoded.right as Json, ...(variant.weight !== undefined ? { weight: variant.weight } : {}) })
  }
  return Either.right(out)
}

/** Declares a typed flag. Throws `FlagDefinitionError` when the default or a variant fails the schema. */
export const defineFlag = <A, I>(options: Options<A, I>): TypedFlag<A, I> => {
  const { key, value: schema, default: authored, variants, experiment, ...fields } = options
  const decoded = Schema.decodeUnknownEither(schema)(Either.getOrElse(Schema.encodeEither(schema)(authored), () => authored))
  if (Either.isLeft(decoded)) {
    throw new FlagDefinitionError(`flag "${key}": the default fails the value schema: ${describe(decoded.left)}`)
  }
  let definition: FlagObject = { ...fields }
  if (variants !== undefined) {
    const encoded = encodeVariants(schema, variants)
    if (Either.isLeft(encoded)) throw new FlagDefinitionError(`flag "${key}": ${encoded.left}`)
    definition = { ...definition, variants: encoded.right }
  }
  Definition.resolve(key, definition)
  return {
    _tag: "TypedFlag",
    key,
    schema,
    default: decoded.right,
    definition,
    experiment: typeof experiment === "string" ? { name: experiment } : experiment
  }
}
