/**
 * The answer of an rpc call whose handler returned an output that fails the procedure's own schema:
 * a defect of the handler. Both rpc transports answer it alike, with a fixed message: the schema's
 * details (field names, the offending values) are logged with the call's trace id, never sent.
 */
import type { ParseResult } from "effect"
import { Effect } from "effect"

/** The encoded `Exit` answered (the rpc wire form of a defect). */
export const exit = { _tag: "Failure", cause: { _tag: "Die", defect: "the output failed its schema" } } as const

/** Logs why the output of `tag`'s call with `traceId` failed its schema; the call is answered `exit`. */
export const answer = (tag: string, traceId: string, error: ParseResult.ParseError): Effect.Effect<typeof exit> =>
  Effect.as(
    Effect.annotateLogs(Effect.logError(`procedure "${tag}": the handler's output does not match its schema`, error.message), { traceId }),
    exit
  )
