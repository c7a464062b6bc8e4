/**
 * Words written per tenant: an incremental aggregate, kept exact by the database on every write of
 * `notes` (a trigger, in the write's transaction), so the page's figure never needs a refresh.
 */
import { Schema } from "effect"
import { defineAggregate } from "@fw/framework/aggregates"

export default defineAggregate({
  name: "words-per-tenant",
  output: Schema.Struct({ tenantId: Schema.String, words: Schema.Number }),
  incremental: {
    source: "notes",
    op: "sum",
    column: "words",
    groupBy: ["tenantId"],
    toRow: ({ group, value }) => ({ tenantId: String(group.tenantId), words: value ?? 0 })
  }
})
