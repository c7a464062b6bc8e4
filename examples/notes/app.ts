/**
 * The notes app: a tenant-scoped `notes` table, its procedures (implementing `contracts.ts`), the
 * password session, a search index over the notes (memory backend, re-seeded from the table at
 * start) and a flag, `delete-notes`, that gates deleting on the server and in the page.
 */
import { HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Schema } from "effect"
import { defineApp, definePlugin, defineTable, mutation, query, requireAuthenticated, requireScope } from "@fw/framework"
import { passwordSessionStrategy } from "@fw/framework/auth"
import { flagsPlugin } from "@fw/framework/flags"
import { searchIndex, searchPlugin } from "@fw/framework/search"
import { accountsPlugin } from "./accounts.js"
import { addNote, deleteNote, listNotes, me, Tag } from "./contracts.js"

/** `tenantField` makes every read and write of a caller confined to the caller's tenant. */
export const Notes = defineTable("notes", {
  fields: {
    tenantId: Schema.String,
    title: Schema.String,
    body: Schema.String,
    tag: Tag,
    author: Schema.String,
    createdAt: Schema.Number
  },
  tenantField: "tenantId"
})

const toNote = (row: typeof Notes.schema.Type) => ({
  id: row.id,
  title: row.title,
  body: row.body,
  tag: row.tag,
  author: row.author,
  createdAt: row.createdAt
})

const whoAmI = query(me.tag, {
  input: me.input,
  output: me.output,
  handler: (_, { subject }) =>
    Effect.succeed(
      subject.type === "user" && subject.tenantId !== null
        ? { id: subject.id, name: String(subject.metadata.name ?? subject.id), tenantId: subject.tenantId }
        : null
    )
})

const list = query(listNotes.tag, {
  input: listNotes.input,
  output: listNotes.output,
  guards: [requireAuthenticated],
  handler: (_, { store }) =>
    Effect.map(store.find(Notes, { orderBy: "createdAt", direction: "desc", limit: 200 }), (rows) => rows.map(toNote))
})

const add = mutation(addNote.tag, {
  input: addNote.input,
  output: addNote.output,
  guards: [requireScope("notes:write")],
  handler: (input, { store, subject }) =>
    Effect.gen(function*() {
      const row = yield* store.insert(Notes, {
        ...input,
        tenantId: subject.tenantId ?? "",
        author: String(subject.metadata.name ?? subject.id),
        createdAt: yield* Clock.currentTimeMillis
      })
      return toNote(row)
    })
})

// No flag check here: `gatedBy` below refuses the call with `FlagDisabled` before the guards run.
// The store confines the delete to the caller's tenant (another tenant's id is "not found").
const remove = mutation(deleteNote.tag, {
  input: deleteNote.input,
  output: deleteNote.output,
  guards: [requireScope("notes:write")],
  handler: ({ id }, { store }) => Effect.as(store.delete(Notes, id), { id })
})

/** The page's HTML; its script is `/app.js`, bundled by `server.ts` at start. */
const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>fw notes</title>
<style>
body{font:15px/1.4 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}
input,select,textarea,button{font:inherit}form{display:flex;gap:.5rem;flex-wrap:wrap;margin:.5rem 0}
li{margin:.25rem 0}.tag{color:#555;font-size:85%;margin-left:.5rem}mark{background:#fe6}
.facets button[aria-pressed=true]{font-weight:bold}.error{color:#b00}
</style></head>
<body><div id="root"></div><script type="module" src="/app.js"></script></body>
</html>`

/** Serves the page and its bundle (`script`, built by `server.ts`). */
const pagePlugin = (script: string) =>
  definePlugin({
    name: "notes-page",
    permissions: [],
    routes: [
      { method: "GET", path: "/", anonymous: true, handler: Effect.succeed(HttpServerResponse.html(html)) },
      {
        method: "GET",
        path: "/app.js",
        anonymous: true,
        handler: Effect.succeed(HttpServerResponse.text(script, { contentType: "text/javascript; charset=utf-8" }))
      }
    ]
  })

/** The app, given the session secret and the page's bundled script. */
export const makeApp = (options: { readonly sessionSecret: string; readonly pageScript: string }) =>
  defineApp({
    name: "notes",
    tables: [Notes],
    procedures: [whoAmI, list, add, remove],
    auth: [passwordSessionStrategy({ secret: options.sessionSecret })],
    plugins: [
      accountsPlugin(options.sessionSecret),
      searchPlugin({
        indexes: {
          notes: searchIndex(Notes, {
            index: "notes",
            tenantField: "tenantId",
            queryableFields: ["tag", "title"],
            searchableFields: ["title", "body"],
            map: (row) => ({ id: row.id, tenantId: row.tenantId, title: row.title, body: row.body, tag: row.tag })
          })
        }
      }),
      // `store: "sql"`: a toggle (from the dashboard) is persisted, audited and survives a restart.
      flagsPlugin({ store: "sql", flags: { "delete-notes": false }, gatedBy: { [deleteNote.tag]: "delete-notes" } }),
      pagePlugin(options.pageScript)
    ]
  })
