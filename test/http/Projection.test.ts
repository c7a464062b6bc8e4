import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { requireScope } from "../../src/app/Guard.js"
import { mutation, query } from "../../src/app/Procedure.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import { bearer, Notes, tokenStrategy } from "../app/fixtures.js"
import * as Serve from "../support/Serve.js"

const list = query("notes.list", {
  input: Schema.Struct({ minRank: Schema.optional(Schema.Number) }),
  output: Schema.Array(Notes.schema),
  publicApi: {},
  handler: ({ minRank }, { store }) =>
    store.find(Notes, { orderBy: "rank", ...(minRank === undefined ? {} : { where: { rank: { gte: minRank } } }) })
})
const add = mutation("notes.add", {
  input: Schema.Struct({ text: Schema.String, rank: Schema.Number }),
  output: Notes.schema,
  guards: [requireScope("notes:write")],
  publicApi: { version: "v2" },
  handler: ({ rank, text }, { store, subject }) => store.insert(Notes, { tenantId: subject.tenantId ?? "", text, rank })
})
const app = defineApp({ name: "projected", tables: [Notes], procedures: [list, add], auth: [tokenStrategy], idempotency: true })
const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const request = (url: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, headers: response.headers, body: await response.text() }
  })
const postJson = (url: string, body: unknown, headers: Record<string, string>) =>
  request(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })

describe("projected procedures", () => {
  it.scopedLive("queries are GETs from the query string, mutations POSTs from the body, with the socket's guards and tenant scoping", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      for (const [rank, token] of [[1, "tok-alice"], [3, "tok-alice"], [5, "tok-bob"]] as const) {
        const created = yield* postJson(`${served.url}/v2/notes/add`, { text: `r${rank}`, rank }, bearer(token))
        assert.strictEqual(created.status, 200, created.body)
      }
      const mine = yield* request(`${served.url}/v1/notes/list?minRank=2`, { headers: bearer("tok-alice") })
      assert.deepStrictEqual(JSON.parse(mine.body).map((n: { text: string }) => n.text), ["r3"])
      const all = yield* request(`${served.url}/v1/notes/list`, { headers: bearer("tok-alice") })
      assert.deepStrictEqual(JSON.parse(all.body).map((n: { text: string }) => n.text), ["r1", "r3"])
      assert.strictEqual((yield* postJson(`${served.url}/v2/notes/add`, { text: "x", rank: 1 }, bearer("tok-carol"))).status, 403)
      assert.strictEqual((yield* postJson(`${served.url}/v2/notes/add`, { text: "x" }, bearer("tok-alice"))).status, 400)
      assert.strictEqual((yield* request(`${served.url}/v1/notes/list?minRank=abc`, { headers: bearer("tok-alice") })).status, 400)
      assert.strictEqual((yield* request(`${served.url}/v1/notes/list`, { method: "DELETE" })).headers.get("allow"), "GET, HEAD")
      // Idempotency applies to projections too.
      const first = yield* postJson(`${served.url}/v2/notes/add`, { text: "once", rank: 9 }, { ...bearer("tok-alice"), "idempotency-key": "p1" })
      const again = yield* postJson(`${served.url}/v2/notes/add`, { text: "once", rank: 9 }, { ...bearer("tok-alice"), "idempotency-key": "p1" })
      assert.deepStrictEqual([again.status, again.headers.get("idempotency-replayed"), again.body], [200, "true", first.body])
      const document = JSON.parse((yield* request(`${served.url}/openapi.json`)).body)
      assert.includeMembers(Object.keys(document.paths), ["/v1/notes/list", "/v2/notes/add"])
      assert.isDefined(document.paths["/v2/notes/add"].post.requestBody)
      assert.strictEqual(document.paths["/v1/notes/list"].get["x-fw-api-version"], "v1")
    }))
})
