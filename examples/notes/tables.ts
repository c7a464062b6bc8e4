/**
 * The `notes` table, in a file of its own: the app, the aggregate and the expectation all read it.
 */
import { Schema } from "effect"
import { defineTable } from "@fw/framework"
import { Tag } from "./contracts.js"

/** `tenantField` makes every read and write of a caller confined to the caller's tenant. */
export const Notes = defineTable("notes", {
  fields: {
    tenantId: Schema.String,
    title: Schema.String,
    body: Schema.String,
    /**
     * Words in the body, counted on write: the aggregate sums it, the expectation bounds it. Null on
     * rows written before the column existed (a `.data/notes.db` of an older version of the
     * example): both leave those rows out.
     */
    words: Schema.NullOr(Schema.Number),
    tag: Tag,
    author: Schema.String,
    createdAt: Schema.Number
  },
  tenantField: "tenantId"
})

/** How many words `body` holds (0 for an empty body). */
export const countWords = (body: string) => body.trim() === "" ? 0 : body.trim().split(/\s+/u).length
