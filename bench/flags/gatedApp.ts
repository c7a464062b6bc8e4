/**
 * The app of the gatedBy benchmark: two identical queries, `items.open` (ungated) and `items.gated`
 * (gated by a flag with a targeting rule and a full rollout the caller passes), so both calls do the
 * same work but the gate.
 */
import { Effect, Layer, Schema } from "effect"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import { flagsPlugin } from "../../src/flags/index.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

const Items = defineTable("items", { fields: { tenantId: Schema.String, name: Schema.String, price: Schema.Number }, tenantField: "tenantId" })
const subject = Subject.make({ type: "user", id: "bench", tenantId: "t1" })
const item = (tag: string) =>
  query(tag, {
    input: Schema.Struct({ id: Schema.String }),
    output: Schema.NullOr(Items.schema),
    handler: ({ id }, { store }) => Effect.map(store.get(Items, id), (row) => row._tag === "Some" ? row.value : null)
  })
const bearer: AuthStrategy.AuthStrategy = {
  id: "bench",
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.succeed(headers["authorization"] === "Bearer bench" ? AuthStrategy.Verdict.Authenticated({ subject }) : AuthStrategy.Verdict.NoMatch())
}
const flags = flagsPlugin({
  flags: { "fast-items": { targeting: [{ tenantIds: ["t1", "t2"] }], rollout: 100 } },
  gatedBy: { "items.gated": "fast-items" }
})
export const app = defineApp({ tables: [Items], procedures: [item("items.open"), item("items.gated")], plugins: [flags], auth: [bearer] })
export const seed = Layer.effectDiscard(Effect.flatMap(Store.Store, (store) => store.insert(Items, { id: "i1", tenantId: "t1", name: "apple", price: 3 })))

