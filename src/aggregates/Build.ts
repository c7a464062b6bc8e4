/** Running an aggregate's `build` (an Effect, a Promise or rows) and the text of what went wrong. */
import { Cause, Effect, Option, ParseResult } from "effect"
import type * as Aggregate from "./Aggregate.js"

/** The text `lastError` holds for a failed build. */
export const errorText = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  const error = Option.isSome(failure) ? failure.value : Option.getOrUndefined(Cause.dieOption(cause))
  if (error === undefined) return Cause.pretty(cause).split("\n")[0] ?? "refresh failed"
  if (typeof error === "object" && error !== null && "_tag" in error && "message" in error) {
    return `${String(error._tag)}: ${String(error.message)}`
  }
  if (error instanceof Error) return error.message
  return String(error)
}

/** `output schema mismatch: row[N] failed output-schema decode at <path>: <issue>` (spec 3.7). */
export const mismatch = (index: number, error: ParseResult.ParseError): string => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  const path = issue === undefined || issue.path.length === 0 ? "(root)" : issue.path.map(String).join(".")
  return `output schema mismatch: row[${index}] failed output-schema decode at ${path}: ${issue?.message ?? error.message}`
}

/** Runs a build whatever it returns: an Effect, a Promise or the rows themselves. */
export const runBuild = (aggregate: Aggregate.Any, ctx: Aggregate.BuildContext): Effect.Effect<ReadonlyArray<unknown>, unknown> =>
  Effect.suspend(() => {
    const result = aggregate.build!(ctx)
    if (Effect.isEffect(result)) return result
    if (result instanceof Promise) return Effect.tryPromise({ try: () => result, catch: (error) => error })
    return Effect.succeed(result)
  })
