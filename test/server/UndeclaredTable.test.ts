/**
 * A table the app uses but did not declare in `defineApp({ tables })` is the app's mistake, not an
 * outage: on every tier a call fails `TableNotDeclared` naming the table (500 with that typed body,
 * logged as an error), never `StoreUnavailable`; a plugin that says it uses an undeclared table
 * fails the boot with the same error.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { definePlugin } from "../../src/app/Plugin.js"
import { mutation, query } from "../../src/app/Procedure.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import { TableNotDeclared } from "../../src/kernel/Errors.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"

const Notes = defineTable("notes", { fields: { text: Schema.String } })
// Used by the procedures below, missing from the app's tables.
const Tags = defineTable("tags", { fields: { name: Schema.String } })

const addTag = mutation("tags.add", {
  input: Schema.Struct({ name: Schema.String }),
  output: Schema.Struct({ id: Schema.String }),
  handler: ({ name }, { store }) => Effect.map(store.insert(Tags, { name }), ({ id }) => ({ id }))
})
const listTags = query("tags.list", {
  input: Schema.Struct({}),
  output: Schema.Array(Tags.schema),
  handler: (_, { store }) => store.find(Tags)
})
const addNote = mutation("notes.add", {
  input: Schema.Struct({ text: Schema.String }),
  output: Notes.schema,
  handler: ({ text }, { store }) => store.insert(Notes, { text })
})
const app = defineApp({ tables: [Notes], procedures: [addTag, listTags, addNote] })

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
const sqlite = Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })))
const pg = Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provideMerge(Pg.layerFreshClient))

const tiers = [
  { name: "memory", layer: memory },
  { name: "sqlite", layer: sqlite },
  ...(Pg.serverUrl === null ? [] : [{ name: "pg", layer: pg }])
] as const
if (Pg.serverUrl === null) console.log(Pg.skipReason)

const call = (url: string, tag: string, body: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/rpc/${tag}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    })
    return { status: response.status, body: await response.json() as unknown }
  })

const message = `table "tags" is not declared: add it to the tables of defineApp({ tables: [...] })`

describe("a table missing from defineApp({ tables })", () => {
  for (const tier of tiers) {
    it.scopedLive(`${tier.name}: a write and a read fail TableNotDeclared naming it (500), never StoreUnavailable`, () =>
      Effect.gen(function*() {
        const served = yield* Serve.serve(app, tier.layer as Layer.Layer<Store.Store | ChangeTap.ChangeTap>, { applySchema: true })
        const expected = { status: 500, body: { _tag: "TableNotDeclared", message } }
        assert.deepStrictEqual(yield* call(served.url, "tags.add", { name: "x" }), expected)
        assert.deepStrictEqual(yield* call(served.url, "tags.list", {}), expected)
        // The declared table is served as ever.
        const added = yield* call(served.url, "notes.add", { text: "hello" })
        assert.strictEqual(added.status, 200)
        // The server log says it where the operator looks, with no database error beside it.
        assert.include(served.logs, `ERROR ${message}`)
        assert.isFalse(served.logs.some((line) => /StoreUnavailable|SQLITE_ERROR|does not exist/.test(line)), served.logs.join("\n"))
      }))
  }

  it.scopedLive("a plugin that uses an undeclared table fails the boot, naming the plugin and the table", () =>
    Effect.gen(function*() {
      const watcher = definePlugin({ name: "watcher", permissions: [], usesTables: [Notes, Tags] })
      const exit = yield* Effect.exit(Serve.serve(defineApp({ tables: [Notes], plugins: [watcher] }), memory))
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : undefined
      assert.isTrue(error?._tag === "Some" && error.value instanceof TableNotDeclared)
      assert.strictEqual(
        error?._tag === "Some" ? (error.value as TableNotDeclared).message : "",
        `plugin "watcher" uses table "tags", which the app does not declare: add it to the tables of defineApp({ tables: [...] })`
      )
    }))
})
