/**
 * How a program that serves an app reports a boot failure: one line, `fw: <what is wrong>`, on
 * stderr, exit code 1, never a stack (the message names the setting, the port or the table and
 * what to do; a stack would bury it). One path for every launcher: the `fw` CLI (`fw serve`,
 * `fw dev`), `NodeServer.runMain` (a program such as the README's `main.ts`), and a setting
 * refused while the app's modules load (`Settings.secretFromEnv` at a module's top level).
 *
 * Loads nothing but `effect`: the CLI reports with it before the framework is loaded.
 */
import { Cause, Effect, Option } from "effect"

const firstLine = (text: unknown): string => typeof text === "string" ? text.split("\n")[0]!.trim() : ""

/**
 * The one line saying what `error` is: its message's first line; for an error without a message
 * its tag or name with its cause's message; never empty.
 */
export const oneLine = (error: unknown): string => {
  if (typeof error !== "object" || error === null) return firstLine(String(error)) || "failed"
  const fields = error as { readonly message?: unknown; readonly _tag?: unknown; readonly name?: unknown; readonly cause?: unknown }
  const message = firstLine(fields.message)
  if (message.length > 0) return message
  const name = firstLine(fields._tag) || firstLine(fields.name) || "failed"
  const cause = fields.cause instanceof Error ? firstLine(fields.cause.message) : firstLine(fields.cause)
  return cause.length > 0 ? `${name}: ${cause}` : name
}

/** The line printed for `error`. */
export const line = (error: unknown): string => `fw: ${oneLine(error)}`

/**
 * Whether `cause` is a failure the user can act on from one line: a typed failure (a tagged error
 * with its message: a port in use, a setting, an undeclared table) or a refused setting thrown as
 * a defect. Anything else is a bug, reported with its stack.
 */
export const reportable = (cause: Cause.Cause<unknown>): Option.Option<unknown> => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return failure
  return Option.filter(Cause.dieOption(cause), isSettingInvalid)
}

const isSettingInvalid = (error: unknown): boolean =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "SettingInvalid"

/**
 * Reports the failure of a launched program: one line and exit code 1 for what `reportable`
 * accepts, the whole cause (as `NodeRuntime.runMain` logs it) for anything else; nothing for an
 * interruption (Ctrl-C).
 */
export const reportCause = (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  const error = reportable(cause)
  return Option.isSome(error)
    ? Effect.sync(() => {
      globalThis.process?.stderr.write(`${line(error.value)}\n`)
    })
    : Effect.logError(cause)
}

/**
 * A setting refused while the app's modules load (at a module's top level, before any launcher
 * runs: the only place left to report it is the process's uncaught-error hook). Until the next
 * macrotask (after the module loader has rethrown the refusal), an uncaught `SettingInvalid` is
 * printed as its one line with exit code 1, instead of Node's eleven lines of source frame and
 * fields. Any other uncaught error meanwhile is reported as Node would (printed, exit 1) unless
 * another listener handles it. A refusal that is caught (a test, `fw serve` loading the entry) is
 * reported by whoever catches it.
 */
export const reportIfUncaught = (): void => {
  const process = globalThis.process
  if (watching || typeof process?.on !== "function") return
  watching = true
  const onUncaught = (error: unknown) => {
    if (isSettingInvalid(error)) {
      process.stderr.write(`${line(error)}\n`)
      return process.exit(1)
    }
    stop()
    if (process.listenerCount("uncaughtException") === 0) {
      console.error(error)
      process.exit(1)
    }
  }
  const stop = () => {
    process.off("uncaughtException", onUncaught)
    watching = false
  }
  process.on("uncaughtException", onUncaught)
  setImmediate(stop)
}
let watching = false
