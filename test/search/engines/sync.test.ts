/**
 * The sync engine over the three engine backends and their fakes: writes during a reindex leave
 * no index behind but the live one (issue 38 item 5), and the sync of many changes goes in batches.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Option, Stream } from "effect"
import * as Store from "../../../src/kernel/store/Store.js"
import { searchIndex } from "../../../src/search/Options.js"
import type { SearchBackendShape } from "../../../src/search/SearchBackend.js"
import { Notes, notesIndex, plugin, settled, stack } from "../support.js"
import type { EngineCase, Fakes } from "./harness.js"
import { freshIndex, useFakes } from "./harness.js"

const { cases, fakes } = useFakes()

/** The engine's index (or collection) names that start with `name`. */
const enginesIndexes = (engine: EngineCase["name"], all: Fakes, name: string): Array<string> => {
  const names = engine === "engineA" ? [...all.typesense.collections.keys(), ...all.typesense.aliases.keys()]
    : engine === "engineB" ? [...all.meilisearch.indexes.keys()]
    : [...all.algolia.indexes.keys()]
  return names.filter((n) => n.startsWith(name)).sort()
}

const docsOf = (backend: SearchBackendShape, index: string) => Effect.map(Stream.runCollect(backend.documents!(index)), Chunk.toReadonlyArray)

for (const engine of cases) {
  describe(`${engine.name}: sync`, () => {
    it.scopedLive("a write whose index write outlasts a reindex's swap leaves no rebuild index behind", () => {
      const name = freshIndex("sync")
      const inner = engine.make({ taskTimeoutMs: 10_000 })
      const entered = Deferred.unsafeMake<void>(undefined as never)
      const swapped = Deferred.unsafeMake<void>(undefined as never)
      // The live write of the row titled "racer" starts before the swap and ends after it.
      const racing = (docs: ReadonlyArray<{ readonly [k: string]: unknown }>) => docs.some((doc) => doc["title"] === "racer")
      const backend: SearchBackendShape = {
        ...inner,
        upsert: (index, docs) =>
          racing(docs) ? Effect.zipRight(Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(swapped)), inner.upsert(index, docs)) : inner.upsert(index, docs),
        write: (index, ops) =>
          racing(ops.flatMap((op) => op.doc === null ? [] : [op.doc]))
            ? Effect.zipRight(Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(swapped)), inner.write!(index, ops))
            : inner.write!(index, ops),
        rebuild: (spec) =>
          Effect.map(inner.rebuild!(spec), (rebuild) => ({
            ...rebuild,
            swap: Effect.zipRight(rebuild.swap, Deferred.succeed(swapped, undefined))
          }))
      }
      const p = plugin(backend, {
        indexes: { notes: searchIndex(Notes, { ...notesIndex, index: name, searchableFields: ["title"], fields: { tenantId: "string", title: "string", n: "number" } }) },
        sync: { reindexBatchSize: 5 }
      })
      return Effect.gen(function*() {
        const store = yield* Store.Store
        yield* store.insertMany(Notes, Array.from({ length: 12 }, (_, i) => ({ id: `w${String(i).padStart(2, "0")}`, tenantId: "t1", title: `row ${i}`, body: "", n: i })))
        yield* settled
        let once = 0
        const result = yield* p.reindex("notes", (event) =>
          event.phase === "walking" && event.done === event.total && once++ === 0
            ? Effect.gen(function*() {
              // Changes during the walk, one of them still being written live when the swap comes.
              yield* store.update(Notes, "w01", { title: "changed" })
              yield* store.delete(Notes, "w02")
              yield* store.insert(Notes, { id: "w99", tenantId: "t1", title: "racer", body: "", n: 99 })
              yield* Deferred.await(entered)
            }).pipe(Effect.orDie)
            : Effect.void)
        assert.isTrue(Option.isSome(result))
        yield* settled
        yield* p.idle
        // Only the live index remains (engineA: its alias and the one collection behind it).
        const left = enginesIndexes(engine.name, fakes, name)
        if (engine.name === "engineA") {
          assert.strictEqual(left.length, 2, left.join(", "))
          assert.strictEqual(fakes.typesense.aliases.get(name), left.find((n) => n !== name))
        } else assert.deepStrictEqual(left, [name])
        const docs = yield* docsOf(inner, name)
        const byId = new Map(docs.map((doc) => [doc.id, doc["title"]]))
        assert.strictEqual(byId.get("w99"), "racer")
        assert.strictEqual(byId.get("w01"), "changed")
        assert.isFalse(byId.has("w02"))
        assert.strictEqual(docs.length, 12)
      }).pipe(Effect.provide(stack(null, p)))
    }, 60_000)
  })
}
