/**
 * The pieces the engine backends share: Retry-After, lazy client loading, shadow codes,
 * filter resolution, highlight escaping, the engineParams gate.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Support from "../../../src/search/EngineSupport.js"
import type { IndexSpec } from "../../../src/search/SearchBackend.js"

const spec: IndexSpec = { index: "x", tenantField: "tenantId", queryableFields: ["brand", "price", "at"], fields: { brand: "string", price: "number", at: "date" } }

describe("EngineSupport", () => {
  it("Retry-After in seconds or as an HTTP date", () => {
    assert.strictEqual(Support.retryAfterMs("10"), 10_000)
    assert.strictEqual(Support.retryAfterMs("0"), 0)
    assert.strictEqual(Support.retryAfterMs("Wed, 21 Oct 2015 07:28:05 GMT", Date.parse("Wed, 21 Oct 2015 07:28:00 GMT")), 5000)
    assert.isUndefined(Support.retryAfterMs("soon"))
    assert.isUndefined(Support.retryAfterMs(null))
  })

  it("statuses: 408, 429 and 5xx are transient; no status (network) is transient; other 4xx permanent", () => {
    assert.strictEqual(Support.backendError("e", "query", "m", { status: 429 }).kind, "transient")
    assert.strictEqual(Support.backendError("e", "query", "m", { status: 408 }).kind, "transient")
    assert.strictEqual(Support.backendError("e", "query", "m", { status: 502 }).kind, "transient")
    assert.strictEqual(Support.backendError("e", "query", "m").kind, "transient")
    assert.strictEqual(Support.backendError("e", "query", "m", { status: 404 }).kind, "permanent")
    assert.strictEqual(Support.backendError("e", "query", "m", { status: 413 }).httpStatus, 413)
  })

  it.effect("a client that cannot be loaded is a permanent failure naming the package; the next use tries again", () =>
    Effect.gen(function*() {
      let attempts = 0
      const load = Support.lazyModule("engineX", "some-client", () => {
        attempts++
        return attempts === 1 ? Promise.reject(new Error("Cannot find package 'some-client'")) : Promise.resolve({ ok: true })
      })
      const error = yield* Effect.flip(load("upsert"))
      assert.strictEqual(error.kind, "permanent")
      assert.match(error.message, /npm install some-client/)
      assert.deepStrictEqual(yield* load("upsert"), { ok: true })
      yield* load("query")
      assert.strictEqual(attempts, 2)
    }))

  it("shadow codes are lower-case, typed and round-trip to the contract's facet keys", () => {
    for (const v of ["Acme", "acme", "ÄÖü \" \\ `", "", "15"]) {
      const code = Support.encodeScalar(v)
      assert.match(code, /^s[0-9a-f]*$/)
      assert.strictEqual(Support.decodeScalar(code), v)
    }
    assert.notStrictEqual(Support.encodeScalar("Acme"), Support.encodeScalar("acme"))
    assert.notStrictEqual(Support.encodeScalar("15"), Support.encodeScalar(15))
    assert.strictEqual(Support.decodeScalar(Support.encodeScalar(59.5)), "59.5")
    assert.strictEqual(Support.decodeScalar(Support.encodeScalar(true)), "true")
    assert.deepStrictEqual(Support.decodeFacetCounts({ [Support.encodeScalar("A")]: 2, junk: 1 }), { A: 2 })
  })

  it("shadow fields of a document, and their removal", () => {
    const doc = { id: "1", tenantId: "t", brand: "Acme", price: 3, at: "2024-01-01T00:00:00Z", title: "x" }
    const shadowed = Support.withShadows(spec, doc)
    assert.deepStrictEqual(shadowed["__fw_eq_brand"], [Support.encodeScalar("Acme")])
    assert.deepStrictEqual(shadowed["__fw_eq_tenantId"], [Support.encodeScalar("t")])
    assert.deepStrictEqual(shadowed["__fw_ts_at"], [Date.parse("2024-01-01T00:00:00Z")])
    assert.isUndefined(shadowed["__fw_eq_title"])
    assert.deepStrictEqual(Support.stripShadows(shadowed), doc)
    assert.strictEqual(Support.eqField("a.b_c"), "__fw_eq_a_db__c")
  })

  it("filter resolution: equality on codes, order on numbers or instants, undeclared fields absent", () => {
    assert.deepStrictEqual(Support.shadowClause(spec, { field: "brand", op: "in", value: ["A", 1] }), {
      kind: "codes", field: "__fw_eq_brand", negate: false, codes: [Support.encodeScalar("A"), Support.encodeScalar(1)]
    })
    assert.deepStrictEqual(Support.shadowClause(spec, { field: "price", op: "gt", value: 3 }), { kind: "range", field: "price", op: "gt", value: 3 })
    assert.deepStrictEqual(Support.shadowClause(spec, { field: "at", op: "lte", value: "2024-01-01" }), { kind: "range", field: "__fw_ts_at", op: "lte", value: Date.parse("2024-01-01") })
    assert.deepStrictEqual(Support.shadowClause(spec, { field: "price", op: "gt", value: "cheap" }), { kind: "never" })
    assert.deepStrictEqual(Support.shadowClause(spec, { field: "other", op: "eq", value: "x" }), { kind: "never" })
    assert.deepStrictEqual(Support.shadowClause(spec, { field: "other", op: "neq", value: "x" }), { kind: "always" })
  })

  it("highlights: the text is escaped, then the caller's tags replace the markers", () => {
    const marked = `<b>${Support.sentinelPre}Fish${Support.sentinelPost}</b> & "chips"`
    assert.strictEqual(Support.finishHighlight(marked, "<mark>", "</mark>"), "&lt;b&gt;<mark>Fish</mark>&lt;/b&gt; &amp; &quot;chips&quot;")
    assert.isUndefined(Support.finishHighlight("<b>no match</b>", "<mark>", "</mark>"))
    assert.strictEqual(Support.finishListHighlight(["a<", `${Support.sentinelPre}b${Support.sentinelPost}`], "[", "]"), "a&lt;, [b]")
    assert.isUndefined(Support.finishListHighlight(["a", "b"], "[", "]"))
  })

  it("a hit's highlights: the requested fields that matched, a list's elements joined; none without a highlight request", () => {
    const doc = { id: "d1", title: "Fish", tags: ["a", "b"], body: "none" }
    const marks: Record<string, string | ReadonlyArray<string>> = {
      title: `${Support.sentinelPre}Fish${Support.sentinelPost}`,
      tags: ["a", `${Support.sentinelPre}b${Support.sentinelPost}`],
      body: "none"
    }
    const highlight = { fields: ["title", "tags", "body", "missing"], preTag: "[", postTag: "]" }
    assert.deepStrictEqual(Support.highlightedHit(doc, highlight, (field) => marks[field]), { doc, highlights: { title: "[Fish]", tags: "a, [b]" } })
    assert.deepStrictEqual(Support.highlightedHit(doc, { ...highlight, fields: ["body"] }, (field) => marks[field]), { doc })
    assert.deepStrictEqual(Support.highlightedHit(doc, highlight, undefined), { doc })
    assert.deepStrictEqual(Support.highlightedHit(doc, undefined, (field) => marks[field]), { doc })
  })

  it.effect("engineParams: only the engine's presentation keys pass", () =>
    Effect.gen(function*() {
      const kept = yield* Support.presentationParams("engineX", { cropLength: 5, filter: "x", q: "y" }, new Set(["cropLength"]))
      assert.deepStrictEqual(kept, { cropLength: 5 })
    }))
})
