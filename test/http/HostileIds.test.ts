/**
 * An id no row can have (NUL, an unpaired surrogate, a megabyte) reaching the store through a REST
 * path or an rpc call is simply not found on every tier: 404, never a 503 from the database.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"
import { send } from "./client.js"
import { bearer, getNote, Notes, tokenStrategy } from "./fixtures.js"

if (!Pg.serverUrl) console.warn(Pg.skipReason)

const noteById = query("notes.byId", {
  input: Schema.Struct({ id: Schema.String }),
  output: Schema.NullOr(Schema.Struct({ id: Schema.String })),
  handler: ({ id }, { store }) => Effect.map(store.get(Notes, id), (note) => note._tag === "Some" ? { id: note.value.id } : null)
})

const app = defineApp({ name: "hostile-ids", tables: [Notes], restRoutes: [getNote], procedures: [noteById], auth: [tokenStrategy] })

const tiers = [
  ["memory", () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))],
  ["sqlite", () => Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })))],
  ["postgresql", Pg.serverUrl ? () => Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provideMerge(Pg.layerFreshClient)) : null]
] as const

// (A megabyte does not fit in a URL: Node answers 431 before any route; 10,000 characters do.)
const hostile = ["%00", "nul%00inside", "%ED%A0%80", "x".repeat(10_000)]

for (const [name, tier] of tiers) {
  describe.skipIf(tier === null)(`hostile ids: ${name}`, () => {
    it.scopedLive("REST paths and rpc calls with an id no row can have answer not found, never 503", () =>
      Effect.gen(function*() {
        const served = yield* Serve.serve(app, tier!(), { applySchema: true })
        for (const id of hostile) {
          const reply = yield* send(`${served.url}/v2/notes/${id}`, { headers: bearer("tok-alice") })
          assert.strictEqual(reply.status, 404, id.slice(0, 16))
        }
        const client = yield* Serve.httpClient(served, app)
        for (const id of ["\u0000", "lone\ud800", "y".repeat(1_000_000)]) {
          assert.isNull(yield* client.call(noteById, { id }, { headers: bearer("tok-alice") }), JSON.stringify(id.slice(0, 8)))
        }
      }))
  })
}
