/**
 * The `fw` command line: `fw dev <entry>`, `fw serve <entry>`, `fw db apply <entry> [--dry-run]`.
 */
import { Args, Command, Options } from "@effect/cli"
import { NodeHttpServer } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { Console, Effect, Layer, Option, Schema } from "effect"
import { createServer } from "node:http"
import { pathToFileURL } from "node:url"
import * as path from "node:path"
import * as Settings from "../app/Settings.js"
import * as SchemaDiffer from "../kernel/SchemaDiffer.js"
import type { Entry } from "./Entry.js"
import * as Server from "./Server.js"

/** The entry module could not be loaded or does not export an entry. */
export class EntryInvalid extends Schema.TaggedError<EntryInvalid>()("EntryInvalid", {
  entry: Schema.String,
  message: Schema.String
}) {}

const loadEntry = (file: string) =>
  Effect.tryPromise({
    try: () => import(pathToFileURL(path.resolve(file)).href) as Promise<{ readonly default?: Entry }>,
    catch: (error) => new EntryInvalid({ entry: file, message: String(error) })
  }).pipe(
    Effect.flatMap((module) =>
      module.default?.app?._tag === "App"
        ? Effect.succeed(module.default)
        : Effect.fail(new EntryInvalid({ entry: file, message: "the default export must be defineEntry({app, store})" }))
    )
  )

const entryArg = Args.file({ name: "entry", exists: "yes" })

const serve = (file: string, dev: boolean) =>
  Effect.gen(function*() {
    const entry = yield* loadEntry(file)
    const port = yield* Settings.positiveIntegerFromEnv("PORT", entry.port ?? 3000)
    const host = entry.host ?? "127.0.0.1"
    const main = Server.layer(entry.app, { applySchema: dev, logRequests: dev }).pipe(
      Layer.provide(entry.store),
      Layer.provide(NodeHttpServer.layer(createServer, { port, host }))
    )
    yield* Effect.logInfo(
      `fw ${dev ? "dev" : "serve"}: "${entry.app.name}" on http://${host}:${port} ` +
        `(rpc ws://${host}:${port}/rpc and POST /rpc, OpenAPI /openapi.json, inspect /_fw/inspect/)`
    )
    return yield* Layer.launch(main)
  })

const dev = Command.make("dev", { entry: entryArg }, ({ entry }) => serve(entry, true)).pipe(
  Command.withDescription("apply the schema, then serve the app with request logs")
)

const serveCommand = Command.make("serve", { entry: entryArg }, ({ entry }) => serve(entry, false)).pipe(
  Command.withDescription("serve the app")
)

const apply = Command.make(
  "apply",
  { entry: entryArg, dryRun: Options.boolean("dry-run").pipe(Options.withDescription("print the plan only")) },
  ({ dryRun, entry: file }) =>
    Effect.gen(function*() {
      const entry = yield* loadEntry(file)
      const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
      if (Option.isNone(sql)) return yield* Console.log("the entry's store is in memory: nothing to apply")
      const steps = yield* (dryRun ? SchemaDiffer.plan(entry.app.tables) : SchemaDiffer.apply(entry.app.tables)).pipe(
        Effect.provideService(SqlClient.SqlClient, sql.value)
      )
      if (steps.length === 0) return yield* Console.log("schema is up to date")
      for (const step of steps) yield* Console.log(`${dryRun ? "would " : ""}${step.description}\n  ${step.sql}`)
    }).pipe(Effect.provide(Layer.unwrapEffect(Effect.map(loadEntry(file), (entry) => entry.store))))
).pipe(Command.withDescription("create the missing tables, columns and indexes"))

const db = Command.make("db").pipe(Command.withSubcommands([apply]))

/** The `fw` command. */
export const command = Command.make("fw").pipe(Command.withSubcommands([dev, serveCommand, db]))

/** Runs the CLI with `argv`. */
export const run = Command.run(command, { name: "fw", version: "0.1.0" })
