/**
 * The `fw` command line: `fw dev <entry>`, `fw serve <entry>`, `fw db apply <entry> [--dry-run]`.
 */
import { Args, Command, Options } from "@effect/cli"
import { SqlClient } from "@effect/sql"
import { Config, Console, Effect, Layer, Option, Schema } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import * as Aggregates from "../aggregates/index.js"
import type { App } from "../app/App.js"
import * as Settings from "../app/Settings.js"
import type * as Search from "../search/index.js"
import * as Standing from "../standing/index.js"
import * as SchemaDiffer from "../kernel/schema/SchemaDiffer.js"
import * as BootServer from "./BootServer.js"
import * as NodeServer from "./NodeServer.js"
import type { Entry } from "./Entry.js"
import { commands, summary, version } from "./CliHelp.js"
import * as Init from "./Init.js"
import * as SchemaApply from "./SchemaApply.js"
import * as Server from "./Server.js"

/** The entry module could not be loaded or does not export an entry. */
export class EntryInvalid extends Schema.TaggedError<EntryInvalid>()("EntryInvalid", {
  entry: Schema.String,
  message: Schema.String
}) {}

/**
 * The nearest `package.json` above `dir` whose `type` is not `"module"`, or undefined. An app
 * folder left at npm's default (`"type": "commonjs"`, or no `type`) loads its `.ts` files as
 * CommonJS, which cannot import the framework's ES modules (`ERR_REQUIRE_CYCLE_MODULE` deep inside).
 */
const commonJsPackage = (dir: string): string | undefined => {
  for (let at = dir; ; at = path.dirname(at)) {
    const file = path.join(at, "package.json")
    if (fs.existsSync(file)) {
      try {
        const type = (JSON.parse(fs.readFileSync(file, "utf8")) as { readonly type?: unknown }).type
        return type === "module" ? undefined : file
      } catch {
        return undefined
      }
    }
    if (path.dirname(at) === at) return undefined
  }
}

/** Whether the module's text declares its default export through `defineEntry`. */
const declaresEntry = (source: string) =>
  /\bdefineEntry\s*\(/.test(source) && /\bexport\s+default\b|\bas\s+default\b/.test(source)

/**
 * Checks the entry before evaluating it, so a file that is not an entry (the README's `main.ts`,
 * which launches its own server at the top level) never starts anything behind the user's back.
 */
const precheck = (file: string) =>
  Effect.gen(function*() {
    const resolved = path.resolve(file)
    if (!/\.(mts|mjs)$/.test(resolved)) {
      const cjs = commonJsPackage(path.dirname(resolved))
      if (cjs !== undefined) {
        return yield* new EntryInvalid({
          entry: file,
          message: `${cjs} does not say "type": "module", so Node loads the app as CommonJS, which cannot load fw (an ES module package): add "type": "module" to it`
        })
      }
    }
    const source = yield* Effect.try({
      try: () => fs.readFileSync(resolved, "utf8"),
      catch: (error) => new EntryInvalid({ entry: file, message: `cannot read it: ${String(error)}` })
    })
    if (!declaresEntry(source)) {
      return yield* new EntryInvalid({
        entry: file,
        message: "not an entry module: its default export must be defineEntry({app, store}) (the file was not run; " +
          "keep a program that launches its own server, like the README's main.ts, separate from the entry)"
      })
    }
  })

const loadEntry = (file: string) =>
  precheck(file).pipe(Effect.zipRight(Effect.tryPromise({
    try: () => import(pathToFileURL(path.resolve(file)).href) as Promise<{ readonly default?: Entry }>,
    // The first line: the rest of a load failure is a stack or a code frame.
    catch: (error) => new EntryInvalid({ entry: file, message: (error instanceof Error ? error.message : String(error)).split("\n")[0]! })
  })), Effect.flatMap((module) =>
    module.default?.app?._tag === "App"
      ? Effect.succeed(module.default)
      : Effect.fail(new EntryInvalid({ entry: file, message: "the default export must be defineEntry({app, store})" }))))

/** Each command's description, as the help page gives it. */
const described = Object.fromEntries(commands.map(([name, , description]) => [name, description])) as Record<typeof commands[number][0], string>

const entryArg = Args.file({ name: "entry", exists: "yes" })

/**
 * The entry's `*.aggregate.ts` files (spec 2.13: found by suffix under the entry's folder): the app
 * with the aggregates plugin added (its `_fw_aggregate_*` tables and inspect routes), and a layer
 * that runs their scheduler on the entry's store (SQL when it has a `SqlClient`, else memory). In
 * `dev` the layer applies the schema first, so the scheduler boots on existing tables.
 */
const withAggregates = (file: string, app: App, dev: boolean) =>
  Effect.gen(function*() {
    const found = yield* Aggregates.discoverAggregates(path.dirname(path.resolve(file)))
    if (found.length === 0) return { app, aggregates: found, layer: Layer.empty }
    if (app.plugins.some((plugin) => plugin.name === "aggregates")) {
      return yield* new EntryInvalid({
        entry: file,
        message: "the app lists an \"aggregates\" plugin, and *.aggregate.ts files were found: the CLI adds the plugin for them, remove it from the app's plugins"
      })
    }
    const inspect = Aggregates.aggregatesPlugin()
    const tables = [...app.tables, ...inspect.plugin.tables ?? []]
    const scheduler = Layer.unwrapEffect(Effect.map(Effect.serviceOption(SqlClient.SqlClient), (sql) =>
      Option.isSome(sql)
        ? Aggregates.layerSql(found, { tables }).pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, sql.value)))
        : Aggregates.layerMemory(found, { tables })))
    return {
      app: { ...app, tables, plugins: [...app.plugins, inspect.plugin] } satisfies App,
      aggregates: found,
      layer: inspect.attach.pipe(Layer.provide(scheduler), Layer.provide(dev ? SchemaApply.layer(tables) : Layer.empty))
    }
  })

/**
 * The entry's `*.expectation.ts`, `*.budget.ts` and `*.experiment.ts` files (spec 2.14: found by
 * suffix under the entry's folder, each default-exporting its definition): the app with a standing
 * plugin running them added. An app that lists its own standing plugin must list every discovered
 * definition in it (one place decides what runs; a file it leaves out would never run).
 */
const withStanding = (file: string, app: App) =>
  Effect.gen(function*() {
    const found = yield* Standing.discoverStanding(path.dirname(path.resolve(file)))
    const count = found.expectations.length + found.budgets.length + found.experiments.length
    if (count === 0) return { app, standing: found, count }
    const listed = app.plugins.find((plugin) => plugin.name === "standing") as Standing.StandingPlugin | undefined
    if (listed !== undefined) {
      const declared = listed.definitions
      for (const [kind, files, names] of [
        ["expectation", found.expectations, declared.expectations.map((e) => e.name)],
        ["cost budget", found.budgets, declared.budgets.map((b) => b.name)],
        ["experiment", found.experiments, declared.experiments.map((e) => e.name)]
      ] as const) {
        const missing = files.find(({ value }) => !names.includes(value.name))
        if (missing !== undefined) {
          return yield* new EntryInvalid({
            entry: file,
            message: `${path.relative(process.cwd(), missing.file)}: ${kind} "${missing.value.name}" is not in the app's standingPlugin: list it there, or remove standingPlugin from the app's plugins and the CLI adds one for every discovered file`
          })
        }
      }
      return { app, standing: found, count }
    }
    const plugin = Standing.standingPlugin({
      expectations: found.expectations.map((f) => f.value),
      budgets: found.budgets.map((f) => f.value),
      experiments: found.experiments.map((f) => f.value)
    })
    const tables = [...app.tables, ...(plugin.tables ?? []).filter((table) => !app.tables.includes(table))]
    return { app: { ...app, tables, plugins: [...app.plugins, plugin] } satisfies App, standing: found, count }
  })

/** The entry's app with what its discovered files add (aggregates, standing primitives). */
const withDiscovered = (file: string, app: App, dev: boolean) =>
  Effect.flatMap(withStanding(file, app), (standing) =>
    Effect.map(withAggregates(file, standing.app, dev), (aggregates) => ({ ...aggregates, standing: standing.standing, standingCount: standing.count })))

/** A `DiscoveryFailed` (a discovered file whose default export is not its definition) as one CLI line. */
const discoveryLine = <A, E, R>(file: string, effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(effect, (error): error is E & Aggregates.DiscoveryFailed => error instanceof Aggregates.DiscoveryFailed, (error) =>
    Effect.fail(new EntryInvalid({ entry: file, message: `${path.relative(process.cwd(), error.file)}: ${error.reason}` })))

const serve = (file: string, dev: boolean) =>
  Effect.gen(function*() {
    const entry = yield* loadEntry(file)
    const { host, port } = yield* address(entry)
    const served = yield* discoveryLine(file, withDiscovered(file, entry.app, dev))
    // The server prints the startup line once it listens.
    // `fw serve` is how an app runs in production: with NODE_ENV unset it counts as production (the
    // procedures' OpenAPI document stays private unless the app opts in); NODE_ENV may say otherwise.
    const nodeEnv = (yield* Config.string("NODE_ENV").pipe(Config.withDefault(""), Effect.orElseSucceed(() => ""))).trim()
    const production = dev ? false : nodeEnv === "" ? true : undefined
    const main = Server.layer(served.app, { applySchema: dev, logRequests: dev, ...(production === undefined ? {} : { production }) }).pipe(
      Layer.provide(served.layer),
      Layer.provide(entry.store),
      Layer.provide(NodeServer.layer(BootServer.createServer, { port, host }))
    )
    if (served.aggregates.length > 0) {
      yield* Effect.logInfo(`fw: aggregates from *.aggregate.ts: ${served.aggregates.map((a) => a.name).join(", ")}`)
    }
    if (served.standingCount > 0) {
      const names = (what: string, found: ReadonlyArray<{ readonly value: { readonly name: string } }>) =>
        found.length === 0 ? [] : [`${what} ${found.map((f) => f.value.name).join(", ")}`]
      yield* Effect.logInfo(`fw: standing primitives from files: ${[
        ...names("expectations", served.standing.expectations),
        ...names("budgets", served.standing.budgets),
        ...names("experiments", served.standing.experiments)
      ].join("; ")}`)
    }
    return yield* portHint(Layer.launch(main))
  })

/** Where the entry is served: `PORT` over the entry's port (default 3000), on the entry's host (default 127.0.0.1). */
const address = (entry: Entry) =>
  Effect.map(Settings.portFromEnv("PORT", entry.port ?? 3000), (port) => ({ port, host: entry.host ?? "127.0.0.1" }))

/**
 * Fails `ListenFailed` when the entry's address cannot be listened on now (the port is taken):
 * `fw dev` checks before it starts watching, so that mistake is one line and exit 1, not a
 * watcher waiting for a file change that cannot help.
 */
const checkAddress = (entry: Entry) =>
  Effect.flatMap(address(entry), (options) =>
    Effect.async<void, NodeServer.ListenFailed>((resume) => {
      const probe = net.createServer()
      probe.once("error", (error) => resume(Effect.fail(NodeServer.listenFailed(options, error))))
      try {
        probe.listen(options, () => probe.close(() => resume(Effect.void)))
      } catch (error) {
        resume(Effect.fail(NodeServer.listenFailed(options, error)))
      }
    }))

/** A listener refusal, told how the CLI chooses another port. */
const portHint = <A, E, R>(effect: Effect.Effect<A, E | NodeServer.ListenFailed, R>) =>
  Effect.catchIf(effect, (error): error is NodeServer.ListenFailed => error instanceof NodeServer.ListenFailed, (error) => {
    const hinted = new NodeServer.ListenFailed({ ...error, message: `${error.message} (set PORT to choose it)` })
    hinted.stack = `ListenFailed: ${hinted.message}`
    return Effect.fail(hinted)
  })

/** The suffixes of the files the CLI discovers under the entry's folder. */
const discoveredSuffixes = [".aggregate.ts", ".expectation.ts", ".budget.ts", ".experiment.ts"] as const

/** Set in the process `fw dev` runs under `tsx watch`: that one serves, its parent only watches. */
const watchedChild = "FW_DEV_WATCHED"

/**
 * `fw dev`: the CLI again under `tsx watch`, which restarts it when the entry or any file it
 * imports changes. The entry is loaded (its settings read) and its port checked here first, so a
 * mistake is one line and exit 1, not a watcher waiting silently.
 */
const watch = (file: string) =>
  Effect.gen(function*() {
    yield* portHint(checkAddress(yield* loadEntry(file)))
    const cli = process.argv[1]
    if (cli === undefined) return yield* serve(file, true)
    const tsx = fileURLToPath(import.meta.resolve("tsx/cli"))
    const exitCode = yield* Effect.async<number>((resume) => {
      // A discovered file is imported, so tsx watches it once it exists; the globs make a new one
      // (or one that failed to load) restart the server too.
      const dir = path.dirname(path.resolve(file))
      const includes = discoveredSuffixes.flatMap((suffix) => ["--include", path.join(dir, `**/*${suffix}`)])
      const child = spawn(process.execPath, [tsx, "watch", "--clear-screen=false", ...includes, cli, "dev", file], {
        stdio: "inherit",
        env: { ...process.env, [watchedChild]: "1" }
      })
      child.on("exit", (code) => resume(Effect.succeed(code ?? 0)))
      return Effect.sync(() => child.kill("SIGTERM"))
    })
    if (exitCode !== 0) process.exitCode = exitCode
  })

const dev = Command.make("dev", { entry: entryArg }, ({ entry }) =>
  process.env[watchedChild] === "1" ? serve(entry, true) : watch(entry)).pipe(
    Command.withDescription(described.dev)
  )

const serveCommand = Command.make("serve", { entry: entryArg }, ({ entry }) => serve(entry, false)).pipe(
  Command.withDescription(described.serve)
)

const apply = Command.make(
  "apply",
  { entry: entryArg, dryRun: Options.boolean("dry-run").pipe(Options.withDescription("print the plan only")) },
  ({ dryRun, entry: file }) =>
    Effect.gen(function*() {
      const entry = yield* loadEntry(file)
      const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
      if (Option.isNone(sql)) return yield* Console.log("the entry's store is in memory: nothing to apply")
      // The tables `fw serve` will need, those of the discovered aggregates and standing primitives included.
      const { app } = yield* discoveryLine(file, withDiscovered(file, entry.app, false))
      const steps = yield* (dryRun ? SchemaDiffer.plan(app.tables) : SchemaDiffer.apply(app.tables)).pipe(
        Effect.provideService(SqlClient.SqlClient, sql.value)
      )
      if (steps.length === 0) return yield* Console.log("schema is up to date")
      for (const step of steps) yield* Console.log(`${dryRun ? "would " : ""}${step.description}\n  ${step.sql}`)
    }).pipe(Effect.provide(Layer.unwrapEffect(Effect.map(loadEntry(file), (entry) => entry.store))))
).pipe(Command.withDescription(described["db apply"]))

const db = Command.make("db").pipe(Command.withDescription("the database schema"), Command.withSubcommands([apply]))

/** One line of progress: a bar, the share, the rows and the phase (redrawn in place on a terminal). */
const progressLine = (progress: Search.ReindexProgress): string => {
  const share = progress.total === 0 ? 1 : Math.min(1, progress.done / progress.total)
  const filled = Math.round(share * 30)
  return `[${"#".repeat(filled)}${"-".repeat(30 - filled)}] ${Math.floor(share * 100)}% ` +
    `${progress.done}/${progress.total} rows (${progress.phase})`
}

const reindex = Command.make(
  "reindex",
  { entry: entryArg, index: Args.text({ name: "index" }) },
  ({ entry: file, index }) =>
    Effect.gen(function*() {
      const entry = yield* loadEntry(file)
      const onProgress = (progress: Search.ReindexProgress) =>
        Effect.sync(() => {
          const line = progressLine(progress)
          if (process.stdout.isTTY) process.stdout.write(`\r${line}${progress.phase === "done" ? "\n" : ""}`)
          else if (progress.phase === "done" || progress.phase === "swapping") process.stdout.write(`${line}\n`)
        })
      // Loaded on demand: the other commands do not pay for the search area at start-up.
      const { reindexCommand } = yield* Effect.promise(() => import("../search/index.js"))
      const result = yield* reindexCommand(entry.app.plugins, index, onProgress).pipe(Effect.provide(entry.store))
      yield* Console.log(`reindexed "${result.index}": ${result.rows} rows`)
    })
).pipe(Command.withDescription(described["search reindex"]))

const search = Command.make("search").pipe(
  Command.withDescription("search indexes"),
  Command.withSubcommands([reindex])
)

const init = Command.make("init", { dir: Args.text({ name: "dir" }) }, ({ dir }) =>
  Effect.gen(function*() {
    const written = yield* Init.init(dir)
    yield* Console.log(`created ${dir}: ${written.join(", ")}\nnext: cd ${dir} && npm install && npm test && npm run dev`)
  })).pipe(Command.withDescription(described.init))

/** The `fw` command. */
export const command = Command.make("fw").pipe(
  Command.withDescription(summary),
  Command.withSubcommands([dev, serveCommand, db, search, init])
)

/** Runs the CLI with `argv`. */
export const run = Command.run(command, { name: "fw", version })
