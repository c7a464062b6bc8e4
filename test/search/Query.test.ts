import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer, Logger, Ref } from "effect"
import { defineApp } from "../../src/app/App.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Memory from "../../src/search/Memory.js"
import type { Query, SearchBackendShape } from "../../src/search/SearchBackend.js"
import { serve } from "../support/Serve.js"
import { Notes, plugin, search, settled, stack } from "./support.js"

const alice = Subject.make({ type: "user", id: "alice", tenantId: "t1" })
const nobody = Subject.make({ type: "user", id: "x", tenantId: null })

/** A memory backend that remembers the queries it was sent. */
const recording = () => {
  const inner = Memory.make()
  const sent: Array<Query> = []
  const backend: SearchBackendShape = { ...inner, name: "recording", query: (index, query) => { sent.push(query); return inner.query(index, query) } }
  return { backend, sent }
}

const seed = Effect.gen(function*() {
  const store = yield* Store.Store
  yield* store.insertMany(Notes, [
    { id: "a1", tenantId: "t1", title: "shared words here", body: "alpha", n: 1 },
    { id: "a2", tenantId: "t1", title: "more shared words", body: "beta", n: 2 },
    { id: "b1", tenantId: "t2", title: "shared words of t2", body: "alpha", n: 1 },
    { id: "b2", tenantId: "t2", title: "secret shared", body: "beta", n: 3 }
  ])
  yield* settled
})

const failure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.exit(effect), (exit) => {
    if (Exit.isSuccess(exit)) return assert.fail("expected a failure")
    const error = exit.cause._tag === "Fail" ? exit.cause.error as { readonly _tag: string; readonly status?: number } : undefined
    return error
  })

describe("search.query", () => {
  it.scoped("refusals of 7.1: SearchIndexNotFound, SearchFieldRejected, SearchQueryInvalid, SearchTenantMissing", () => {
    const p = plugin("memory")
    return Effect.gen(function*() {
      yield* seed
      for (const index of ["nope", "__proto__", "constructor", "toString"]) {
        const error = yield* failure(search(p, alice, { index, q: "x" }))
        assert.strictEqual(error?._tag, "SearchIndexNotFound")
        assert.strictEqual(error?.status, 404)
      }
      const rejected = [
        { filters: [{ field: "tenantId", op: "eq" as const, value: "t2" }] },
        { filters: [{ field: "tenantId.x", op: "eq" as const, value: "t2" }] },
        { filters: [{ field: "body", op: "eq" as const, value: "alpha" }] },
        { filters: [{ field: "1bad", op: "eq" as const, value: "x" }] },
        { filters: [{ field: "a b", op: "eq" as const, value: "x" }] },
        { facets: ["tenantId"] },
        { facets: ["__proto__"] },
        { highlight: { fields: ["tenantId"], preTag: "<b>", postTag: "</b>" } },
        { highlight: { fields: ["body"], preTag: "<b>", postTag: "</b>" } }
      ]
      for (const input of rejected) {
        const error = yield* failure(search(p, alice, { index: "notes", q: "shared", ...input }))
        assert.strictEqual(error?._tag, "SearchFieldRejected", JSON.stringify(input))
        assert.strictEqual(error?.status, 400)
      }
      const invalid = [
        { filters: [{ field: "n", op: "in" as const, value: [] }] },
        { filters: [{ field: "n", op: "in" as const, value: 1 }] },
        { filters: [{ field: "n", op: "eq" as const, value: [1] }] },
        { filters: [{ field: "title", op: "gt" as const, value: "abc" }] },
        { filters: [{ field: "n", op: "gt" as const, value: Number.NaN }] }
      ]
      for (const input of invalid) {
        const error = yield* failure(search(p, alice, { index: "notes", q: "shared", ...input }))
        assert.strictEqual(error?._tag, "SearchQueryInvalid", JSON.stringify(input))
      }
      const tenantless = yield* failure(search(p, nobody, { index: "notes", q: "shared" }))
      assert.strictEqual(tenantless?._tag, "SearchTenantMissing")
      assert.strictEqual(tenantless?.status, 403)
    }).pipe(Effect.provide(stack(null, p)))
  })

  it.scoped("the caller's tenant is ANDed after validation; engineParams are filtered and the dropped ones logged", () => {
    const { backend, sent } = recording()
    const p = plugin(backend, { allowedEngineParams: ["custom_presentation", "filter_by"] })
    return Effect.gen(function*() {
      yield* seed
      const logs = yield* Ref.make<Array<string>>([])
      const logger = Logger.make(({ message }) => Effect.runSync(Ref.update(logs, (all) => [...all, String(message)])))
      const result = yield* search(p, alice, {
        index: "notes",
        q: "shared",
        facets: ["n"],
        engineParams: { custom_presentation: 1, attributesToSnippet: ["title"], filter_by: "tenantId:=t2", Filter_By: "x", preset: "p", query_by: "secret" }
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      assert.deepStrictEqual(result.hits.map((h) => h.doc["id"]).sort(), ["a1", "a2"])
      const query = sent.at(-1)!
      assert.deepStrictEqual(query.filters[0], { field: "tenantId", op: "eq", value: "t1" })
      assert.deepStrictEqual(query.engineParams, { custom_presentation: 1, attributesToSnippet: ["title"] })
      const logged = (yield* Ref.get(logs)).join("\n")
      assert.include(logged, `dropped engineParams not allowed: "filter_by", "Filter_By", "preset", "query_by"`)
    }).pipe(Effect.provide(stack(null, p)))
  })

  it.scoped("tenant isolation fuzz: no input by t1 ever returns a t2 document", () => {
    const p = plugin("memory")
    return Effect.gen(function*() {
      yield* seed
      let seed32 = 7
      const rand = () => (seed32 = (seed32 * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff
      const pick = <A>(items: ReadonlyArray<A>) => items[Math.floor(rand() * items.length)]!
      const fields = ["tenantId", "title", "n", "__proto__", "constructor", "prototype", "tenantId.__proto__", "hasOwnProperty", "secretish", "title.length", "valueOf"]
      const values = ["t2", "t1", 1, 3, "", "shared", "' OR 1=1 --", "\" || tenantId:=t2", "`", "t2\u0000", ["t2"], ["t1", "t2"]]
      const ops = ["eq", "neq", "gt", "gte", "lt", "lte", "in", "nin"] as const
      const engineKeys = ["filter", "filters", "filter_by", "facetFilters", "numericFilters", "tenantId", "__proto__", "constructor", "q", "index"]
      let answered = 0
      for (let i = 0; i < 400; i++) {
        const input = {
          index: "notes",
          q: pick(["shared", "", "alpha", "secret", "words t2", "t2"]),
          fuzziness: pick(["auto", 0, 1, 2] as const),
          filters: Array.from({ length: Math.floor(rand() * 3) }, () => ({ field: pick(fields), op: pick(ops), value: pick(values) as never })),
          facets: rand() < 0.3 ? [pick(fields)] : [],
          engineParams: Object.fromEntries(Array.from({ length: Math.floor(rand() * 3) }, () => [pick(engineKeys), pick(values)]))
        }
        const outcome = yield* Effect.either(search(p, alice, input))
        if (outcome._tag === "Left") continue
        answered++
        for (const hit of outcome.right.hits) assert.strictEqual(hit.doc["tenantId"], "t1", JSON.stringify(input))
        for (const counts of Object.values(outcome.right.facets)) assert.notProperty(counts, "t2", JSON.stringify(input))
      }
      assert.isAbove(answered, 50)
    }).pipe(Effect.provide(stack(null, p)))
  })

  it.scoped("inspect routes: indexes, drift, resync and a streamed reindex, behind the inspect token", () => {
    const p = plugin("memory")
    const app = defineApp({ tables: [Notes], plugins: [p] })
    return Effect.gen(function*() {
      const served = yield* serve(app, Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal)))
      const base = `${served.url}/_fw/inspect/plugins/search`
      const auth = { authorization: "Bearer secret-token" }
      const call = (method: string, path: string, body?: unknown) =>
        Effect.promise(() =>
          fetch(`${base}${path}`, { method, headers: auth, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
            .then(async (response) => ({ status: response.status, text: await response.text() }))
        )
      assert.strictEqual((yield* Effect.promise(() => fetch(`${base}/indexes`))).status, 401)
      const indexes = yield* call("GET", "/indexes")
      assert.strictEqual(indexes.status, 200)
      const view = JSON.parse(indexes.text).indexes[0]
      assert.deepStrictEqual([view.name, view.pendingDrift, view.drifted, view.retryPolicy.retries], ["notes", 0, false, 3])
      assert.deepStrictEqual(JSON.parse((yield* call("GET", "/drift")).text), { entries: [] })
      assert.deepStrictEqual(JSON.parse((yield* call("POST", "/resync")).text), { scanned: 0, repaired: 0, failed: 0 })
      const reindex = yield* call("POST", "/reindex", { index: "notes" })
      assert.strictEqual(reindex.status, 200)
      const lines = reindex.text.trim().split("\n").map((line) => JSON.parse(line))
      assert.deepStrictEqual(lines.map((line) => line.phase), ["walking", "swapping", "done"])
      assert.strictEqual((yield* call("POST", "/reindex", { index: "nope" })).status, 404)
      assert.strictEqual((yield* call("POST", "/reindex", "bad")).status, 400)
    }).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["FW_INSPECT_TOKEN", "secret-token"]]))))
  })
})
