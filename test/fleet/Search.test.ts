/**
 * Two real app processes sharing one PostgreSQL and one search index (the sql backend on the same
 * database), fleet change scope: a write on one is searchable through `search.query` on the other;
 * drift repair and reindex run once across the fleet, not once per replica.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Client from "../../src/client/Client.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import { searchTables } from "../../src/search/tables.js"
import * as Pg from "../support/Pg.js"
import { Docs, makePlugin } from "./searchApp.js"
import * as Fleet from "./support.js"

// Only its `search.query` definition is used (for the client); its backend is never started.
const searchQuery = makePlugin("memory").procedures!.find((procedure) => procedure.tag === "search.query")!

/** Starts a replica; killed when the scope closes. */
const start = (name: string, appPath: string, databaseUrl: string) =>
  Effect.gen(function*() {
    const { url } = yield* Fleet.spawnApp(name, appPath, { DATABASE_URL: databaseUrl, FW_REPLICA_ID: name })
    const client = yield* Client.connect([searchQuery], Client.layerHttp(`${url}/rpc`))
    const search = (q: string): Effect.Effect<Array<string>> =>
      Effect.map(client.call(searchQuery, { index: "docs", q, limit: 1000, fuzziness: 0 }), (result) =>
        (result as { readonly hits: ReadonlyArray<{ readonly doc: { readonly id?: unknown } }> }).hits.map((hit) => String(hit.doc.id)).sort()).pipe(Effect.orDie)
    return { url, search }
  })

const json = <A>(url: string, method = "GET", body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(url, { method, ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }) })
    if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${await response.text()}`)
    return (await response.json()) as A
  })

describe.skipIf(Pg.serverUrl === null)("search shared by two replicas (real processes on one PostgreSQL)", () => {
  it.scopedLive("a write on one is searchable on the other; repair and reindex run once", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([Docs, ...searchTables]).pipe(Effect.provide(Pg.layerClient(url)))
      const appPath = yield* Effect.promise(() => Fleet.bundleApp("searchApp.ts"))
      // One after the other: the first creates the sql backend's tables.
      const r0 = yield* start("r0", appPath, url)
      const r1 = yield* start("r1", appPath, url)

      // 1. Writes on either replica are found through the other.
      yield* json(`${r0.url}/_write`, "POST", { id: "a", title: "zebra crossing" })
      yield* json(`${r1.url}/_write`, "POST", { id: "b", title: "zebra stripes" })
      const seen = yield* Fleet.eventually(Effect.all([r1.search("zebra"), r0.search("zebra")]), ([on1, on0]) => on1.length === 2 && on0.length === 2)
      assert.deepStrictEqual(seen, [["a", "b"], ["a", "b"]])
      // Each write's pending-sync marker is cleared once indexed, and clearing it sends nothing to
      // the other replica: the marker table never reaches the outbox.
      const markers = yield* Fleet.eventually(Fleet.withPg(url, (c) => c.query(`SELECT count(*)::int AS n FROM _fw_search_pending`).then((r) => r.rows[0].n as number)), (left) => left === 0)
      assert.strictEqual(markers, 0)
      const outboxed = yield* Fleet.withPg(url, (c) =>
        c.query(`SELECT change->>'table' AS t, count(*)::int AS n FROM _fw_change_outbox, jsonb_array_elements(changes) AS change GROUP BY 1`)
          .then((r) => Object.fromEntries(r.rows.map((row) => [row.t as string, row.n as number]))))
      assert.strictEqual(outboxed["docs"], 2)
      assert.strictEqual(outboxed["_fw_search_pending"], undefined)

      // 2. Rows written behind the app's back, each with a drift entry: both replicas sweep every
      //    200 ms, and every entry is repaired exactly once.
      const n = 40
      yield* Fleet.withPg(url, async (c) => {
        const now = Date.now()
        for (let i = 0; i < n; i++) {
          await c.query(`INSERT INTO docs (id, "tenantId", title) VALUES ($1, 'acme', 'quagga herd')`, [`q${i}`])
          await c.query(
            `INSERT INTO _fw_search_drift (id, "indexName", "rowId", "tableName", state, "lastError", "errorKind", attempts, "firstFailedAt", "lastFailedAt")
             VALUES ($1, 'docs', $2, 'docs', 'failed', 'engine down', 'transient', 1, $3, $3)`,
            [`docs:q${i}`, `q${i}`, now]
          )
        }
      })
      const found = yield* Fleet.eventually(r1.search("quagga"), (ids) => ids.length === n)
      assert.strictEqual(found.length, n)
      const drift = yield* Fleet.eventually(Fleet.withPg(url, (c) => c.query(`SELECT count(*)::int AS n FROM _fw_search_drift`).then((r) => r.rows[0].n as number)), (left) => left === 0)
      assert.strictEqual(drift, 0)
      // A few more sweeps on both, then count: the repairs add up to the entries, not twice them.
      yield* Effect.sleep("1 second")
      const repairs = yield* Effect.all([json<{ repaired: number }>(`${r0.url}/_repairs`), json<{ repaired: number }>(`${r1.url}/_repairs`)])
      assert.strictEqual(repairs[0].repaired + repairs[1].repaired, n, `repairs per replica: ${repairs.map((r) => r.repaired).join(", ")}`)

      // 3. A reindex asked of both while the first holds its first page: one runs, the other is refused.
      const first = yield* Effect.fork(json<{ ran: boolean; rows: number }>(`${r0.url}/_reindex?holdMs=3000`, "POST"))
      yield* Fleet.eventually(Fleet.withPg(url, (c) => c.query(`SELECT holder FROM _fw_search_lease WHERE id = 'reindex:docs'`).then((r) => r.rows.map((row) => row.holder as string))), (holders) => holders.length === 1)
      const second = yield* json<{ ran: boolean; rows: number }>(`${r1.url}/_reindex`, "POST")
      assert.deepStrictEqual(second, { ran: false, rows: 0 })
      assert.deepStrictEqual(yield* Effect.flatMap(Effect.succeed(first), (fiber) => fiber.await.pipe(Effect.flatMap((exit) => exit))), { ran: true, rows: n + 2 })
      // The lease is released: the other replica may reindex now, and the index is still whole.
      assert.deepStrictEqual(yield* json<{ ran: boolean; rows: number }>(`${r1.url}/_reindex`, "POST"), { ran: true, rows: n + 2 })
      assert.strictEqual((yield* r0.search("quagga")).length, n)
      assert.deepStrictEqual(yield* r0.search("zebra"), ["a", "b"])
    }), { timeout: 180_000 })
})
