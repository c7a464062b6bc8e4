/**
 * A small two-tenant notes app for transport tests, with a bearer-token strategy whose tokens map
 * to fixed subjects ("bad" is a token of the right kind that fails verification).
 */
import { Effect, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { requireScope } from "../../src/app/Guard.js"
import { action, mutation, query } from "../../src/app/Procedure.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as TokenStrategy from "../support/TokenStrategy.js"

export const Notes = defineTable("notes", {
  fields: { tenantId: Schema.String, text: Schema.String, rank: Schema.Number },
  tenantField: "tenantId"
})

export const subjects: Record<string, Subject.Subject> = {
  "tok-alice": Subject.make({ type: "user", id: "alice", tenantId: "acme", scopes: ["notes:write"] }),
  "tok-bob": Subject.make({ type: "user", id: "bob", tenantId: "globex", scopes: ["notes:write"] }),
  "tok-carol": Subject.make({ type: "user", id: "carol", tenantId: "acme", scopes: [] })
}

/** `Authorization: Bearer tok-*`: known tokens authenticate, `tok-bad` fails, no header is anonymous. */
export const tokenStrategy = TokenStrategy.make("test-token", subjects)

export const listNotes = query("notes.list", {
  input: Schema.Struct({ minRank: Schema.optional(Schema.Number) }),
  output: Schema.Array(Notes.schema),
  handler: ({ minRank }, { store }) =>
    store.find(Notes, { ...(minRank === undefined ? {} : { where: { rank: { gte: minRank } } }), orderBy: "rank" })
})

export const addNote = mutation("notes.add", {
  input: Schema.Struct({ text: Schema.String.pipe(Schema.minLength(1)), rank: Schema.Number }),
  output: Notes.schema,
  guards: [requireScope("notes:write")],
  handler: ({ rank, text }, { store, subject }) => store.insert(Notes, { tenantId: subject.tenantId ?? "", text, rank })
})

export const whoAmI = query("auth.whoAmI", {
  input: Schema.Struct({}),
  output: Schema.Struct({ id: Schema.String, tenantId: Schema.NullOr(Schema.String), traceId: Schema.String }),
  handler: (_, { subject, traceId }) => Effect.succeed({ id: subject.id, tenantId: subject.tenantId, traceId })
})

export const fail = action("test.fail", {
  input: Schema.Struct({ how: Schema.Literal("status", "defect", "secret") }),
  output: Schema.Void,
  handler: ({ how }) =>
    how === "status"
      ? Effect.fail({ status: 418, message: "I'm a teapot" })
      : how === "defect"
      ? Effect.die(new Error("boom"))
      : Effect.fail(new Error("password=hunter2"))
})

export const app = defineApp({
  name: "notes",
  tables: [Notes],
  procedures: [listNotes, addNote, whoAmI, fail],
  auth: [tokenStrategy]
})

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
