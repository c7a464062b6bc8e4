/**
 * Table declarations refused at definition, each with a clear message.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { defineTable, TableDefinitionError } from "../../src/kernel/schema/Table.js"

describe("defineTable", () => {
  it("refuses names and fields that are not plain identifiers, a declared id, unknown tenant or index fields", () => {
    const refused: ReadonlyArray<() => unknown> = [
      () => defineTable("bad-name", { fields: { a: Schema.String } }),
      () => defineTable("t", { fields: { "a b": Schema.String } }),
      () => defineTable("t", { fields: { id: Schema.String } }),
      () => defineTable("t", { fields: { a: Schema.String }, tenantField: "b" as "a" }),
      () => defineTable("t", { fields: { a: Schema.String }, indexes: [["b" as "a"]] })
    ]
    for (const define of refused) assert.throws(define, TableDefinitionError)
  })

  it("refuses a tenant field that is not a string: SQL would match \"42.0\" or \" 42\" against 42", () => {
    assert.throws(() => defineTable("orgs", { fields: { orgId: Schema.Number }, tenantField: "orgId" }), /must be a string field/)
    assert.doesNotThrow(() => defineTable("orgs", { fields: { orgId: Schema.String }, tenantField: "orgId" }))
  })
})
