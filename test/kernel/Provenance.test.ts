import { assert, describe, it } from "@effect/vitest"
import * as Provenance from "../../src/kernel/changes/Provenance.js"

describe("Provenance", () => {
  it("new trace ids are 32 lowercase hex digits, all distinct", () => {
    const ids = Array.from({ length: 2_000 }, Provenance.newTraceId)
    for (const id of ids) assert.match(id, /^[0-9a-f]{32}$/)
    assert.strictEqual(new Set(ids).size, ids.length)
  })

  it("a request's trace id is its well-formed x-fw-trace-id header, else a fresh one", () => {
    assert.strictEqual(Provenance.traceIdOf({ "x-fw-trace-id": "caller-trace-0001" }), "caller-trace-0001")
    const fresh = Provenance.traceIdOf({ "x-fw-trace-id": "bad id!" })
    assert.match(fresh, /^[0-9a-f]{32}$/)
  })
})
