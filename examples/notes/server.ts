/**
 * Starts the notes example: bundles the React page with esbuild (no CDN), then serves the app on an
 * embedded SQLite file, applying its schema at boot, with the scheduler of its aggregate running.
 * (`fw dev` would find `*.aggregate.ts` and `*.expectation.ts` itself; this file shows the wiring.)
 *
 *   PORT           default 3000
 *   HOST           default 127.0.0.1
 *   NOTES_DB       the SQLite file, default examples/notes/.data/notes.db
 *   SESSION_SECRET at least 32 bytes; unset, a development secret is used (and said so)
 *   FW_INSPECT_TOKEN the dashboard's token (/_fw/dashboard); unset, a random one is made and printed
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Console, Effect, Layer } from "effect"
import * as esbuild from "esbuild"
import { randomBytes } from "node:crypto"
import { mkdirSync, readFileSync } from "node:fs"
import { createServer } from "node:http"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { ChangeTap, NodeServer, SchemaDiffer, Server, Settings, Store } from "@fw/framework"
import * as Aggregates from "@fw/framework/aggregates"
import { demoUsers } from "./accounts.js"
import { aggregateDefinitions, aggregates, makeApp } from "./app.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const port = Settings.positiveIntegerFromEnvSync("PORT", 3000)
const host = process.env.HOST ?? "127.0.0.1"
const dbFile = process.env.NOTES_DB ?? path.join(here, ".data", "notes.db")
mkdirSync(path.dirname(dbFile), { recursive: true })

const developmentSecret = "notes-example-development-secret-not-for-production"
const sessionSecret = process.env.SESSION_SECRET === undefined ? developmentSecret : Settings.secretFromEnv("SESSION_SECRET")
// The inspect surface and dashboard read FW_INSPECT_TOKEN; a fresh one per start keeps them closed to guesses.
process.env.FW_INSPECT_TOKEN ??= randomBytes(18).toString("base64url")

/** The page, bundled in memory for the browser (React included), served at `/app.js`. */
const bundlePage = Effect.promise(() =>
  esbuild.build({
    entryPoints: [path.join(here, "page", "main.tsx")],
    bundle: true,
    platform: "browser",
    format: "esm",
    minify: true,
    write: false,
    logLevel: "warning",
    define: { "process.env.NODE_ENV": "\"production\"" }
  })
).pipe(Effect.map((result) => result.outputFiles[0]!.text))

/** The stylesheet, served as a file: the page's policy allows no inline style. */
const pageStyle = readFileSync(path.join(here, "page", "style.css"), "utf8")

const main = Effect.gen(function*() {
  const pageScript = yield* bundlePage
  const app = makeApp({ sessionSecret, pageScript, pageStyle })
  // The scheduler boots on existing tables (its triggers go on `notes`): apply the schema first.
  const Scheduler = aggregates.attach.pipe(
    Layer.provide(Aggregates.layerSql(aggregateDefinitions, { tables: app.tables })),
    Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(app.tables)))
  )
  const Main = Server.layer(app, { applySchema: true, announce: false }).pipe(
    Layer.provide(Scheduler),
    Layer.provide(Store.layerSql),
    Layer.provide(ChangeTap.layerLocal),
    Layer.provide(SqliteClient.layer({ filename: dbFile })),
    Layer.provide(NodeServer.layer(createServer, { port, host }))
  )
  // The line is printed once the server listens.
  return yield* Layer.launch(Main.pipe(Layer.tap(() => Console.log([
    `notes: serving on http://${host}:${port} (SQLite file ${path.relative(process.cwd(), dbFile)})`,
    `  sign up, or sign in as ${demoUsers.map((user) => `${user.email} / ${user.password}`).join(", ")}`,
    `  dashboard: http://${host}:${port}/_fw/dashboard with the token ${process.env.FW_INSPECT_TOKEN}`,
    ...(sessionSecret === developmentSecret ? ["  SESSION_SECRET is unset: using a development secret"] : [])
  ].join("\n")))))
})

NodeServer.runMain(main)
