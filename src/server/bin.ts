#!/usr/bin/env node
import { ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer, Logger } from "effect"
import * as Cli from "./Cli.js"

// FW_LOG_FORMAT=json: every log line one JSON object (for log collectors); unset, runMain's pretty
// lines. The pretty logger runMain installs must be disabled, or both would print.
const json = process.env.FW_LOG_FORMAT === "json"

Cli.run(process.argv).pipe(
  // A usage mistake (a missing argument, an unknown command): @effect/cli has printed it already.
  Effect.catchIf(ValidationError.isValidationError, () => Effect.sync(() => process.exitCode = 1)),
  Effect.catchIf(
    (error): error is Cli.EntryInvalid => error instanceof Cli.EntryInvalid,
    (error) => Console.error(`fw: ${error.entry}: ${error.message}`).pipe(Effect.zipRight(Effect.sync(() => process.exitCode = 1)))
  ),
  // A command's own failure (an unknown index, a refused configuration) is one readable line.
  Effect.catchIf(
    (error): error is Error => error instanceof Error,
    (error) => Console.error(`fw: ${error.message}`).pipe(Effect.zipRight(Effect.sync(() => process.exitCode = 1)))
  ),
  Effect.provide(NodeContext.layer),
  Effect.provide(json ? Logger.json : Layer.empty),
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: json })
)
