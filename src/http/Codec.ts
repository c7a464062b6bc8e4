/**
 * Decoding and encoding through route schemas on the request path: synchronously when the schema
 * allows it (no asynchronous transformation), which spares the fiber machinery on every request,
 * and through the effectful parser otherwise.
 */
import type { ParseResult } from "effect"
import { Effect, Either, Schema } from "effect"
import * as PlainSchema from "./PlainSchema.js"

/** A result now, or an effect producing it (an asynchronous schema). */
export type Outcome<A> =
  | Either.Either<A, ParseResult.ParseError>
  | Effect.Effect<Either.Either<A, ParseResult.ParseError>>

/** A synchronous run of an asynchronous schema fails with `Forbidden`: run it as an effect then. */
const needsEffect = <A>(result: Either.Either<A, ParseResult.ParseError>) =>
  Either.isLeft(result) && result.left.issue._tag === "Forbidden"

const make = <A>(
  sync: (input: unknown) => Either.Either<A, ParseResult.ParseError>,
  effect: (input: unknown) => Effect.Effect<A, ParseResult.ParseError>,
  plain: PlainSchema.Fit | undefined
) =>
(input: unknown): Outcome<A> => {
  // A plain schema's check-and-copy answers a value that fits; anything else goes to the parser.
  if (plain !== undefined) {
    const fitted = plain(input)
    if (fitted !== PlainSchema.Unfit) return Either.right(fitted as A)
  }
  const result = sync(input)
  return needsEffect(result) ? Effect.either(effect(input)) : result
}

/** A decoder of unknown input through `schema` (all errors reported, excess properties ignored). */
export const decoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const options = { errors: "all", onExcessProperty: "ignore" } as const
  return make(Schema.decodeUnknownEither(schema, options), Schema.decodeUnknown(schema, options), PlainSchema.compile(schema.ast, options))
}

/** An encoder of a value through `schema`. */
export const encoder = <A, I>(schema: Schema.Schema<A, I>) =>
  make(Schema.encodeUnknownEither(schema), Schema.encodeUnknown(schema), PlainSchema.compile(schema.ast, undefined))

/** The result of an outcome, waiting for it if it is an effect. */
export const run = <A>(outcome: Outcome<A>): Effect.Effect<Either.Either<A, ParseResult.ParseError>> =>
  Either.isEither(outcome) ? Effect.succeed(outcome) : outcome
