/**
 * A row whose new version cannot be indexed (its `map` throws, or the document is invalid) must
 * not stay findable as its old document: after a move to another tenant, the old tenant would
 * otherwise still get a hit for a row it can no longer read. The old document is removed when
 * the new one is refused, the failure is recorded in the drift ledger, and a repair once `map`
 * accepts the row indexes it under its new tenant. On every store tier.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { SearchDrift } from "../../src/search/tables.js"
import * as Pg from "../support/Pg.js"
import { Notes, plugin, search, settled, stack } from "./support.js"

const t1 = Subject.make({ type: "user", id: "alice", tenantId: "t1" })
const t2 = Subject.make({ type: "user", id: "bob", tenantId: "t2" })

const tiers: ReadonlyArray<readonly [string, () => Parameters<typeof stack>[0]]> = [
  ["memory", () => null],
  ["sqlite", () => SqliteClient.layer({ filename: ":memory:" }).pipe(Layer.orDie)],
  ...(Pg.serverUrl === null ? [] : [["pg", () => Pg.layerFreshClient] as const])
]

for (const [name, client] of tiers) {
  describe(`search: a row moved to another tenant whose new document is refused (${name})`, () => {
    it.scoped("the old tenant no longer finds it; the refusal is in the ledger; a repair indexes it for the new tenant", () => {
      const p = plugin("memory")
      return Effect.gen(function*() {
        const store = yield* Store.Store
        yield* Subject.asSystem(store.insert(Notes, { id: "n1", tenantId: "t1", title: "alpha plan", body: "secret roadmap", n: 1 }))
        yield* settled
        assert.deepStrictEqual((yield* search(p, t1, { index: "notes", q: "roadmap" })).hits.map((hit) => hit.doc["id"]), ["n1"])
        // Moved to t2; "boom" makes the test index's map throw.
        yield* Subject.asSystem(store.update(Notes, "n1", { tenantId: "t2", title: "boom" }))
        yield* settled
        assert.deepStrictEqual((yield* search(p, t1, { index: "notes", q: "roadmap" })).hits, [], "t1 still finds the moved row")
        assert.deepStrictEqual((yield* search(p, t2, { index: "notes", q: "roadmap" })).hits, [])
        const drift = yield* Subject.asSystem(store.find(SearchDrift))
        assert.deepStrictEqual(drift.map((entry) => [entry.rowId, entry.state]), [["n1", "failed"]])
        // Fixed: the row indexes again, under its new tenant.
        yield* Subject.asSystem(store.update(Notes, "n1", { title: "beta plan" }))
        yield* settled
        assert.deepStrictEqual((yield* search(p, t2, { index: "notes", q: "roadmap" })).hits.map((hit) => hit.doc["id"]), ["n1"])
        assert.deepStrictEqual((yield* search(p, t1, { index: "notes", q: "roadmap" })).hits, [])
      }).pipe(Effect.provide(stack(client(), p)))
    })
  })
}
