/** The app tables of the aggregates tests (no test-runner imports: the soak uses them too). */
import { Schema } from "effect"
import { defineTable } from "../../src/kernel/schema/Table.js"

/** The source table of the incremental tests. */
export const Orders = defineTable("orders", {
  fields: { g: Schema.String, h: Schema.Boolean, x: Schema.NullOr(Schema.Number) },
  indexes: [["g", "h", "x"], ["x"]]
})
export const Events = defineTable("events", { fields: { kind: Schema.String } })
export const appTables = [Orders, Events]

