import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as Columns from "../../src/kernel/schema/Columns.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

describe("Columns", () => {
  it("derives each column's kind and nullability from the encoded side of its schema", () => {
    const Mixed = defineTable("mixed", {
      fields: {
        text: Schema.String.pipe(Schema.minLength(1)),
        count: Schema.Int,
        ratio: Schema.Number,
        flag: Schema.Boolean,
        status: Schema.Literal("open", "closed"),
        level: Schema.Literal(1, 2, 3),
        at: Schema.Date,
        big: Schema.BigInt,
        parsed: Schema.NumberFromString,
        tags: Schema.Array(Schema.String),
        mixed: Schema.Union(Schema.String, Schema.Number),
        maybe: Schema.optional(Schema.Number),
        nullable: Schema.NullOr(Schema.Boolean),
        both: Schema.optional(Schema.NullOr(Schema.String))
      }
    })
    const described = Columns.of(Mixed).map((c) => `${c.name}:${c.kind}${c.optional ? "?" : ""}${c.nullable ? "|null" : ""}`)
    assert.deepStrictEqual(described, [
      "id:text",
      "text:text",
      "count:number",
      "ratio:number",
      "flag:boolean",
      "status:text",
      "level:number",
      "at:text",
      "big:text",
      "parsed:text",
      "tags:json",
      "mixed:json",
      "maybe:number?",
      "nullable:boolean|null",
      "both:text?|null"
    ])
  })

  it("maps kinds to SQL types per dialect", () => {
    const column = (kind: Columns.Kind): Columns.Column => ({ name: "c", kind, optional: false, nullable: false })
    assert.deepStrictEqual(
      (["text", "number", "boolean", "json"] as const).map((kind) => [Columns.sqlType(column(kind), "sqlite"), Columns.sqlType(column(kind), "pg")]),
      [["TEXT", `TEXT COLLATE "C"`], ["REAL", "DOUBLE PRECISION"], ["INTEGER", "BOOLEAN"], ["TEXT", "JSONB"]]
    )
    assert.strictEqual(Columns.sqlType({ ...column("text"), name: "id" }, "pg"), `TEXT COLLATE "C" PRIMARY KEY`)
  })
})
