/**
 * The plugin loads an engine backend from `src/search/engines/<engine>.js` by a computed import
 * and calls `make(config)` in its scope; the module shape must match.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

describe("engine entries", () => {
  for (const [engine, config] of [
    ["engineA", { engine: "engineA", url: "http://127.0.0.1:1", apiKey: "k" }],
    ["engineB", { engine: "engineB", url: "http://127.0.0.1:1", apiKey: "k" }],
    ["engineC", { engine: "engineC", appId: "APP", apiKey: "k" }]
  ] as const) {
    it.scoped(`${engine}: make(config) gives a durable backend named after the engine`, () =>
      Effect.gen(function*() {
        const module = (yield* Effect.promise(() => import(`../../../src/search/engines/${engine}.ts`))) as {
          make: (c: unknown) => Effect.Effect<{ name: string; durable?: boolean; upsert: unknown; remove: unknown; query: unknown; ensureIndex?: unknown; rebuild?: unknown; documents?: unknown }, unknown, never>
        }
        const backend = yield* module.make(config)
        assert.strictEqual(backend.name, engine)
        assert.strictEqual(backend.durable, true)
        for (const method of ["upsert", "remove", "query", "ensureIndex", "rebuild", "documents"] as const) assert.isFunction(backend[method])
      }))
  }
})
