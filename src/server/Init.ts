/**
 * `fw init <dir>`: scaffolds a working app (an entry, one table, one procedure pair, a test) that
 * passes its own `npm test` on the embedded SQLite.
 */
import { Effect, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

/** The target directory exists and is not empty: nothing is written. */
export class InitRefused extends Schema.TaggedError<InitRefused>()("InitRefused", {
  dir: Schema.String,
  message: Schema.String
}) {}

// The versions the scaffold asks for: the package's own line and the peers it supports (README "Install").
const versions = {
  "@fw/framework": "^0.1.0",
  effect: "^3.22.4",
  "@effect/platform": "^0.97.2",
  "@effect/platform-node": "^0.108.2",
  "@effect/sql": "^0.52.1",
  "@effect/sql-sqlite-node": "^0.53.0"
}

const files = (name: string): Record<string, string> => ({
  "package.json": JSON.stringify({
    name,
    private: true,
    type: "module",
    scripts: {
      dev: "fw dev main.ts",
      start: "fw serve main.ts",
      "db:apply": "fw db apply main.ts",
      test: "tsc --noEmit && node --import tsx --test test/app.test.ts"
    },
    dependencies: versions,
    devDependencies: { "@types/node": "^20.19.0", tsx: "^4.23.15", typescript: "^5.9.3" }
  }, null, 2) + "\n",
  "tsconfig.json": JSON.stringify({
    compilerOptions: {
      target: "ES2022",
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      exactOptionalPropertyTypes: true,
      skipLibCheck: true,
      types: ["node"],
      noEmit: true
    },
    include: ["main.ts", "src/**/*.ts", "test/**/*.ts"]
  }, null, 2) + "\n",
  ".gitignore": "node_modules\n*.db\n*.db-*\n",
  "src/app.ts": `/** The app: one table and the procedures over it. */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Layer, Schema } from "effect"
import { ChangeTap, Store, defineApp, defineTable, mutation, query } from "@fw/framework"

/** A table is a struct of fields; fw adds \`id\`. Give it a \`tenantField\` to scope rows per tenant. */
export const Tasks = defineTable("tasks", {
  fields: { title: Schema.String, done: Schema.Boolean }
})

export const addTask = mutation("tasks.add", {
  input: Schema.Struct({ title: Schema.NonEmptyTrimmedString }),
  output: Tasks.schema,
  handler: ({ title }, { store }) => store.insert(Tasks, { title, done: false })
})

export const listTasks = query("tasks.list", {
  input: Schema.Struct({}),
  output: Schema.Array(Tasks.schema),
  handler: (_, { store }) => store.find(Tasks, { orderBy: "title" })
})

export const app = defineApp({ name: ${JSON.stringify(name)}, tables: [Tasks], procedures: [addTask, listTasks] })

/** The store on an embedded SQLite file (\`:memory:\` in tests), with the SqlClient for \`fw db apply\`. */
export const sqliteStore = (filename: string) =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provideMerge(SqliteClient.layer({ filename }))
  )
`,
  "main.ts": `/** The entry \`fw dev main.ts\` and \`fw serve main.ts\` run. */
import { defineEntry } from "@fw/framework"
import { app, sqliteStore } from "./src/app.js"

export default defineEntry({ app, store: sqliteStore(process.env.DB_FILE ?? "app.db"), port: 3000 })
`,
  "test/app.test.ts": `/** Serves the app on a free port over an in-memory SQLite database and calls it over POST /rpc. */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer } from "effect"
import * as assert from "node:assert/strict"
import { createServer } from "node:http"
import { test } from "node:test"
import { Client, Server } from "@fw/framework"
import { addTask, app, listTasks, sqliteStore } from "../src/app.js"

test("a task added is listed", () =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      Server.layer(app, { applySchema: true }).pipe(
        Layer.provide(sqliteStore(":memory:")),
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
      )
    )
    const { address } = Context.get(context, HttpServer.HttpServer)
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
    const client = yield* Client.connect(app.procedures.values(), Client.layerHttp(\`http://127.0.0.1:\${address.port}/rpc\`))
    const added = yield* client.call(addTask, { title: "write the docs" })
    assert.equal(added.title, "write the docs")
    assert.deepEqual((yield* client.call(listTasks, {})).map((task) => task.title), ["write the docs"])
  }).pipe(Effect.scoped, Effect.runPromise))
`,
  "README.md": `# ${name}

An app on [fw](https://www.npmjs.com/package/@fw/framework).

\`\`\`sh
npm install
npm run dev    # applies the schema to app.db and serves on http://127.0.0.1:3000
npm test       # type check, then the app's tests on an in-memory SQLite database
\`\`\`
`
})

/** Writes the scaffold into `dir` (created; refused when it holds anything). Returns the files written. */
export const init = (dir: string): Effect.Effect<ReadonlyArray<string>, InitRefused> =>
  Effect.gen(function*() {
    const root = path.resolve(dir)
    if (fs.existsSync(root) && (!fs.statSync(root).isDirectory() || fs.readdirSync(root).length > 0)) {
      return yield* new InitRefused({ dir, message: `${dir} exists and is not empty: nothing was written` })
    }
    const name = path.basename(root).toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[._-]+/, "") || "fw-app"
    const written: Array<string> = []
    yield* Effect.try({
      try: () => {
        for (const [file, text] of Object.entries(files(name))) {
          fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
          fs.writeFileSync(path.join(root, file), text)
          written.push(file)
        }
      },
      catch: (error) => new InitRefused({ dir, message: `could not write the scaffold: ${String(error)}` })
    })
    return written
  })
