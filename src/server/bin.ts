#!/usr/bin/env node
import { ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer, Logger } from "effect"
import * as Launch from "../app/Launch.js"
import * as CliHelp from "./CliHelp.js"

// FW_LOG_FORMAT=json: every log line one JSON object (for log collectors); unset, runMain's pretty
// lines. The pretty logger runMain installs must be disabled, or both would print.
const json = process.env.FW_LOG_FORMAT === "json"

const ansi = /\x1b\[[0-9;]*m/g

/**
 * The console, its colour codes removed from text bound for a stream that is not a terminal (a
 * pipe, a file, a CI log) or when `NO_COLOR` is set: @effect/cli colours its help and errors always.
 */
const plain = (console: Console.Console): Console.Console => {
  const strip = (tty: boolean | undefined) => (args: ReadonlyArray<unknown>) =>
    tty === true && process.env.NO_COLOR === undefined ? args : args.map((arg) => typeof arg === "string" ? arg.replace(ansi, "") : arg)
  const out = strip(process.stdout.isTTY)
  const err = strip(process.stderr.isTTY)
  return {
    ...console,
    log: (...args) => console.log(...out(args)),
    info: (...args) => console.info(...out(args)),
    error: (...args) => console.error(...err(args)),
    warn: (...args) => console.warn(...err(args))
  }
}

const args = process.argv.slice(2)
const program = args.length === 0 || (args.length === 1 && (args[0] === "--help" || args[0] === "-h"))
  ? Console.log(CliHelp.help(CliHelp.version).trimEnd())
  : Effect.flatMap(Effect.promise(() => import("./Cli.js")), (Cli) => Cli.run(process.argv))

program.pipe(
  // A usage mistake (a missing argument, an unknown command): @effect/cli has printed it already.
  Effect.catchIf(ValidationError.isValidationError, () => Effect.sync(() => process.exitCode = 1)),
  Effect.catchIf(
    (error): error is { readonly _tag: "EntryInvalid"; readonly entry: string; readonly message: string } =>
      typeof error === "object" && error !== null && "_tag" in error && error._tag === "EntryInvalid",
    (error) => Console.error(`fw: ${error.entry}: ${error.message}`).pipe(Effect.zipRight(Effect.sync(() => process.exitCode = 1)))
  ),
  // A command's own failure (an unknown index, a refused configuration, a port in use, an
  // undeclared table) is one readable line, as every launcher reports it (`Launch`).
  Effect.catchAll((error) => Console.error(Launch.line(error)).pipe(Effect.zipRight(Effect.sync(() => process.exitCode = 1)))),
  (program) => Console.consoleWith((console) => Effect.withConsole(program, plain(console))),
  Effect.provide(NodeContext.layer),
  Effect.provide(json ? Logger.json : Layer.empty),
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: json })
)
