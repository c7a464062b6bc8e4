/**
 * The notes app: the tenant-scoped `notes` table (`tables.ts`), its procedures (implementing
 * `contracts.ts`), the password session, a search index over the notes (memory backend, re-seeded
 * from the table at start), a flag, `delete-notes`, that gates deleting on the server and in the
 * page, an aggregate (`words.aggregate.ts`), an expectation (`bodies.expectation.ts`), and the routes
 * serving the page under a strict Content-Security-Policy.
 */
import { HttpServerResponse } from "@effect/platform"
import { Clock, Effect } from "effect"
import { defineApp, definePlugin, mutation, query, requireAuthenticated, requireScope } from "@fw/framework"
import { aggregatesPlugin, useAggregate } from "@fw/framework/aggregates"
import { passwordSessionStrategy } from "@fw/framework/auth"
import { flagsPlugin } from "@fw/framework/flags"
import { searchIndex, searchPlugin } from "@fw/framework/search"
import { standingPlugin, useExpectation } from "@fw/framework/standing"
import { accountsPlugin } from "./accounts.js"
import bodies, { maxEmptyShare } from "./bodies.expectation.js"
import { addNote, deleteNote, listNotes, me, noteStats } from "./contracts.js"
import { countWords, Notes } from "./tables.js"
import wordsPerTenant from "./words.aggregate.js"

export { Notes } from "./tables.js"

/** The aggregates plugin (its tables, inspect routes, and the scheduler offered to handlers); `server.ts` attaches the scheduler. */
export const aggregates = aggregatesPlugin()

/** The aggregates the app runs (`server.ts` starts their scheduler). */
export const aggregateDefinitions = [wordsPerTenant]

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
        words: countWords(input.body),
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

/** The tenant's words, from the aggregate (the aggregates plugin offers its scheduler to handlers). */
const wordsOf = (tenantId: string) =>
  Effect.map(useAggregate(wordsPerTenant).read({ where: { tenantId } }), (rows) => rows[0]?.words ?? 0)

const stats = query(noteStats.tag, {
  input: noteStats.input,
  output: noteStats.output,
  guards: [requireAuthenticated],
  handler: (_, { store, subject }) =>
    Effect.gen(function*() {
      // Counting the tenant's notes reads the table: the live query re-runs on each of its writes,
      // after the aggregate (same transaction) and the expectation (before the write returns) moved.
      const notes = yield* store.count(Notes)
      const words = yield* wordsOf(subject.tenantId ?? "")
      const check = yield* useExpectation(bodies)
      return {
        notes,
        words,
        bodies: { status: check?.status ?? "unknown", rate: check?.metric ?? null, maxRate: maxEmptyShare }
      }
    })
})

/**
 * The page: no inline script or style, so the policy allows only this origin's files (`/app.js`,
 * `/style.css`) and its own socket; a markup injection could run nothing.
 */
const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'"
].join("; ")

const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>fw notes</title>
<link rel="stylesheet" href="/style.css"></head>
<body><div id="root"></div><script type="module" src="/app.js"></script></body>
</html>`

const asset = (body: string, contentType: string) =>
  Effect.succeed(HttpServerResponse.text(body, { contentType }).pipe(HttpServerResponse.setHeader("x-content-type-options", "nosniff")))

/** Serves the page, its bundle and its stylesheet (both read by `server.ts` at start). */
const pagePlugin = (page: { readonly script: string; readonly style: string }) =>
  definePlugin({
    name: "notes-page",
    permissions: [],
    routes: [
      {
        method: "GET",
        path: "/",
        anonymous: true,
        handler: Effect.succeed(HttpServerResponse.html(html).pipe(HttpServerResponse.setHeader("content-security-policy", contentSecurityPolicy)))
      },
      { method: "GET", path: "/app.js", anonymous: true, handler: asset(page.script, "text/javascript; charset=utf-8") },
      { method: "GET", path: "/style.css", anonymous: true, handler: asset(page.style, "text/css; charset=utf-8") }
    ]
  })

/** The app, given the session secret and the page's bundled script and stylesheet. */
export const makeApp = (options: { readonly sessionSecret: string; readonly pageScript: string; readonly pageStyle: string }) =>
  defineApp({
    name: "notes",
    tables: [Notes],
    procedures: [whoAmI, list, add, remove, stats],
    auth: [passwordSessionStrategy({ secret: options.sessionSecret })],
    plugins: [
      accountsPlugin(options.sessionSecret),
      searchPlugin({
        indexes: {
          notes: searchIndex(Notes, {
            index: "notes",
            tenantField: "tenantId",
            // `body` is queryable so that its matches can be highlighted.
            queryableFields: ["tag", "title", "body"],
            searchableFields: ["title", "body"],
            map: (row) => ({ id: row.id, tenantId: row.tenantId, title: row.title, body: row.body, tag: row.tag })
          })
        }
      }),
      // `store: "sql"`: a toggle (from the dashboard) is persisted, audited and survives a restart.
      flagsPlugin({ store: "sql", flags: { "delete-notes": false }, gatedBy: { [deleteNote.tag]: "delete-notes" } }),
      aggregates.plugin,
      standingPlugin({ expectations: [bodies] }),
      pagePlugin({ script: options.pageScript, style: options.pageStyle })
    ]
  })
