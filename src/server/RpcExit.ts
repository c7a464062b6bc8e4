/**
 * The encoded `Exit` of a procedure call, as `@effect/rpc` encodes it with the rpc's exit schema
 * (`Schema.Exit` of the procedure's output and the app's wire errors), made without the effect
 * machinery per call: both rpc transports answer plain calls with it.
 */
import { Either, Schema } from "effect"
import type { Effect, ParseResult } from "effect"
import type { WireError } from "../app/Errors.js"
import { wireError } from "../app/Errors.js"
import type * as Procedure from "../app/Procedure.js"
import type { RuntimeShape } from "../app/Runtime.js"

/** The encoders of one served app. */
export interface Encoders {
  /** The encoded `Exit` of a call that failed with `error`. */
  readonly failure: (error: WireError) => unknown
  /**
   * The encoded `Exit` of a call that answered `output`, encoded synchronously; Left when the
   * synchronous encode fails (an output that fails its schema, or an asynchronous schema: the
   * caller decides with the effectful encoder, `successLater`).
   */
  readonly success: (procedure: Procedure.Any, output: unknown) => Either.Either<unknown, ParseResult.ParseError>
  /** The effectful encoder of `procedure`'s output (the fallback of `success`). */
  readonly successLater: (procedure: Procedure.Any) => (output: unknown) => Effect.Effect<unknown, ParseResult.ParseError>
}

/** The encoders of `runtime`'s app; the per-procedure encoders are compiled once, on first use. */
export const make = (runtime: RuntimeShape): Encoders => {
  const encodeError = Schema.encodeSync(wireError(runtime.app.errors))
  const now = new Map<Procedure.Any, (output: unknown) => Either.Either<unknown, ParseResult.ParseError>>()
  const later = new Map<Procedure.Any, (output: unknown) => Effect.Effect<unknown, ParseResult.ParseError>>()
  return {
    failure: (error) => ({ _tag: "Failure", cause: { _tag: "Fail", error: encodeError(error) } }),
    success: (procedure, output) => {
      let encode = now.get(procedure)
      if (encode === undefined) {
        encode = Schema.encodeUnknownEither(procedure.output)
        now.set(procedure, encode)
      }
      return Either.map(encode(output), (value) => ({ _tag: "Success", value }))
    },
    successLater: (procedure) => {
      let encode = later.get(procedure)
      if (encode === undefined) {
        encode = Schema.encodeUnknown(procedure.output)
        later.set(procedure, encode)
      }
      return encode
    }
  }
}
