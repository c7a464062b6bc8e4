/**
 * Failure classification of the engine backends (notes §1.4): what a retry can cure is
 * `transient`, what the engine refuses is `permanent`; a write counts only once the engine's
 * task succeeded.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { IndexSpec } from "../../../src/search/SearchBackend.js"
import { freshIndex, useFakes } from "./harness.js"

const { cases, fakes } = useFakes()

const spec = (index: string): IndexSpec => ({
  index,
  tenantField: "tenantId",
  searchableFields: ["title"],
  fields: { tenantId: "string", title: "string", price: "number" }
})

const doc = { id: "d1", tenantId: "t1", title: "Hello world", price: 3 }
const query = { q: "hello", limit: 10, offset: 0, fuzziness: 0 as const, filters: [{ field: "tenantId", op: "eq" as const, value: "t1" }], facets: [], engineParams: {} }

for (const engine of cases) {
  describe(`${engine.name}: failure classification`, () => {
    const ready = (tuning = {}) =>
      Effect.gen(function*() {
        const backend = engine.make({ timeoutMs: 5000, taskTimeoutMs: 10_000, ...tuning })
        const index = freshIndex(engine.name)
        yield* backend.ensureIndex!(spec(index))
        return { backend, index }
      })

    it.live("a 5xx is transient, with its status", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready()
        engine.fake().inject({ kind: "status", status: 503, times: Infinity })
        const error = yield* Effect.flip(backend.query(index, query))
        assert.strictEqual(error._tag, "SearchBackendError")
        assert.strictEqual(error.kind, "transient")
        assert.strictEqual(error.backend, engine.name)
        assert.strictEqual(error.operation, "query")
        assert.strictEqual(error.httpStatus, 503)
      }))

    it.live("a 429 with Retry-After is transient", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready()
        engine.fake().inject({ kind: "status", status: 429, retryAfterSeconds: 0, times: Infinity })
        const error = yield* Effect.flip(backend.upsert(index, [doc]))
        assert.strictEqual(error.kind, "transient")
        assert.strictEqual(error.httpStatus, 429)
        if (engine.name === "engineB") assert.strictEqual(error.retryAfterMs, 0)
      }))

    if (engine.name === "engineB") {
      it.live("Retry-After is carried in milliseconds", () =>
        Effect.gen(function*() {
          const { backend, index } = yield* ready()
          engine.fake().inject({ kind: "status", status: 503, retryAfterSeconds: 10, body: { message: "Too many search requests", code: "too_many_search_requests", type: "system", link: "" } })
          const error = yield* Effect.flip(backend.query(index, query))
          assert.strictEqual(error.kind, "transient")
          assert.strictEqual(error.retryAfterMs, 10_000)
        }))
    }

    if (engine.name === "engineC") {
      it.live("a single 429 is retried by the client itself (Retry-After honoured) and the write lands", () =>
        Effect.gen(function*() {
          const { backend, index } = yield* ready()
          engine.fake().inject({ kind: "status", status: 429, retryAfterSeconds: 0, times: 1 })
          yield* backend.upsert(index, [doc])
          const result = yield* backend.query(index, query)
          assert.deepStrictEqual(result.hits.map((h) => h.doc.id), ["d1"])
        }))
    }

    it.live("a 4xx the engine answers is permanent", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready()
        engine.fake().inject({ kind: "status", status: 400, body: { message: "bad request", code: "bad_request", type: "invalid_request", link: "", status: 400 } })
        const error = yield* Effect.flip(backend.query(index, query))
        assert.strictEqual(error.kind, "permanent")
        assert.strictEqual(error.httpStatus, 400)
        engine.fake().inject({ kind: "status", status: 403, body: { message: "forbidden", code: "invalid_api_key", type: "auth", link: "", status: 403 } })
        const auth = yield* Effect.flip(backend.upsert(index, [doc]))
        assert.strictEqual(auth.kind, "permanent")
      }))

    it.live("a timeout is transient", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready({ timeoutMs: 2000 })
        engine.fake().inject({ kind: "hang", times: Infinity })
        const error = yield* Effect.flip(backend.query(index, query))
        assert.strictEqual(error.kind, "transient")
      }))

    it.live("a reset connection is transient", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready()
        engine.fake().inject({ kind: "reset", times: Infinity })
        const error = yield* Effect.flip(backend.remove(index, ["d1"]))
        assert.strictEqual(error.kind, "transient")
      }))

    it.live("an engine that is not there is transient", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready()
        engine.fake().inject({ kind: "reset", times: Infinity })
        const error = yield* Effect.flip(backend.upsert(index, [doc]))
        assert.strictEqual(error.kind, "transient")
      }))

    it.live("a document with a reserved field is refused, permanent, before any request", () =>
      Effect.gen(function*() {
        const { backend, index } = yield* ready()
        const before = engine.fake().requests.length
        const error = yield* Effect.flip(backend.upsert(index, [{ ...doc, __fw_eq_tenantId: ["x"] }]))
        assert.strictEqual(error.kind, "permanent")
        assert.strictEqual(engine.fake().requests.length, before)
      }))
  })
}

describe("asynchronous acknowledgements: a write is done when the engine says its task succeeded", () => {
  it.live("engineA: an import line the engine refuses is a permanent failure", () =>
    Effect.gen(function*() {
      const backend = cases[0]!.make()
      const index = freshIndex("ack_a")
      yield* backend.ensureIndex!(spec(index))
      fakes.typesense.rejectDocuments = (d) => (d["id"] === "bad" ? "Field `title` must be a string." : undefined)
      const error = yield* Effect.flip(backend.upsert(index, [doc, { ...doc, id: "bad" }]))
      assert.strictEqual(error.kind, "permanent")
      assert.match(error.message, /title/)
    }))

  it.live("engineA: a document of the wrong type fails its import line", () =>
    Effect.gen(function*() {
      const backend = cases[0]!.make()
      const index = freshIndex("ack_a2")
      yield* backend.ensureIndex!(spec(index))
      const error = yield* Effect.flip(backend.upsert(index, [{ ...doc, price: "three" }]))
      assert.strictEqual(error.kind, "permanent")
      assert.match(error.message, /price/)
    }))

  it.live("engineB: a failed task is a permanent failure, though the write was accepted (202)", () =>
    Effect.gen(function*() {
      const backend = cases[1]!.make()
      const index = freshIndex("ack_b")
      yield* backend.ensureIndex!(spec(index))
      fakes.meilisearch.failTasks = (d) => (d["title"] === "poison" ? "invalid_document_fields" : undefined)
      const error = yield* Effect.flip(backend.upsert(index, [{ ...doc, title: "poison" }]))
      assert.strictEqual(error.kind, "permanent")
      assert.match(error.message, /failed: invalid_document_fields/)
      const enqueued = fakes.meilisearch.requests.filter((r) => r.operationId === "replace_documents")
      assert.isAbove(enqueued.length, 0)
    }))

  it.live("engineB: ids outside [A-Za-z0-9_-] are encoded, so the engine accepts them", () =>
    Effect.gen(function*() {
      const backend = cases[1]!.make()
      const index = freshIndex("ack_b2")
      yield* backend.ensureIndex!(spec(index))
      yield* backend.upsert(index, [{ ...doc, id: "a/b c?é" }])
      const result = yield* backend.query(index, query)
      assert.deepStrictEqual(result.hits.map((h) => h.doc.id), ["a/b c?é"])
    }))

  it.live("engineB: a task that does not finish in time is transient (the outcome is unknown)", () =>
    Effect.gen(function*() {
      const backend = cases[1]!.make({ taskTimeoutMs: 2500 })
      const index = freshIndex("ack_b3")
      yield* backend.ensureIndex!(spec(index))
      fakes.meilisearch.inject({ kind: "hang", times: Infinity, match: (r) => r.path.startsWith("/tasks/") })
      const error = yield* Effect.flip(backend.upsert(index, [doc]))
      assert.strictEqual(error.kind, "transient")
    }))

  it.live("engineC: a task never published within the wait is transient (the outcome is unknown)", () =>
    Effect.gen(function*() {
      const backend = cases[2]!.make({ taskTimeoutMs: 2500 })
      const index = freshIndex("ack_c")
      yield* backend.ensureIndex!(spec(index))
      fakes.algolia.stallTasks = true
      const error = yield* Effect.flip(backend.upsert(index, [doc]))
      assert.strictEqual(error.kind, "transient")
    }))
})
