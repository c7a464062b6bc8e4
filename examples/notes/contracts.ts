/**
 * The procedures the page calls, as handler-less contracts: the browser bundle imports these (tag,
 * kind, schemas) and nothing of the server; `app.ts` implements them with the same tags and schemas.
 */
import { Schema } from "effect"

/** The tags a note may carry: the search box facets on them. */
export const Tag = Schema.Literal("idea", "todo", "reference")
export type Tag = typeof Tag.Type

export const Note = Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  body: Schema.String,
  tag: Tag,
  author: Schema.String,
  createdAt: Schema.Number
})
export type Note = typeof Note.Type

/** Who the page is signed in as; null when anonymous (the page then shows the login form). */
export const me = {
  tag: "session.me",
  kind: "query",
  input: Schema.Struct({}),
  output: Schema.NullOr(Schema.Struct({ id: Schema.String, name: Schema.String, tenantId: Schema.String }))
} as const

/** The caller's tenant's notes, newest first (live over the socket). */
export const listNotes = {
  tag: "notes.list",
  kind: "query",
  input: Schema.Struct({}),
  output: Schema.Array(Note)
} as const

export const addNote = {
  tag: "notes.add",
  kind: "mutation",
  input: Schema.Struct({
    title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
    body: Schema.String.pipe(Schema.maxLength(10_000)),
    tag: Tag
  }),
  output: Note
} as const

/** Gated by the `delete-notes` flag on the server: off, it fails `FlagDisabled`. */
export const deleteNote = {
  tag: "notes.delete",
  kind: "mutation",
  input: Schema.Struct({ id: Schema.String }),
  output: Schema.Struct({ id: Schema.String })
} as const

/**
 * The figures under the list: the tenant's notes and words (`words` from the `words-per-tenant`
 * aggregate) and the `notes-have-bodies` expectation (app-wide: its status and rate only).
 * Live: it reads the notes table, so every write re-runs it.
 */
export const noteStats = {
  tag: "notes.stats",
  kind: "query",
  input: Schema.Struct({}),
  output: Schema.Struct({
    notes: Schema.Number,
    words: Schema.Number,
    bodies: Schema.Struct({
      status: Schema.Literal("holding", "violated", "unknown"),
      /** Share of notes with an empty body; null with no notes. */
      rate: Schema.NullOr(Schema.Number),
      maxRate: Schema.Number
    })
  })
} as const
