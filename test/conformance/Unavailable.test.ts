/**
 * A database that is down or refuses writes gives a typed `StoreUnavailable` (never a defect),
 * and the error names the failure, not the data.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import pg from "pg"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as RecordingTap from "../kernel/support/RecordingTap.js"
import * as Pg from "../support/Pg.js"
import { item, Items, tables } from "./fixtures.js"

/** The tag of every failure: `Effect.flip` lets a defect through, so a defect fails the test. */
const failureTags = (store: Store.StoreShape) =>
  Effect.all({
    get: Effect.flip(store.get(Items, "secret-id")),
    find: Effect.flip(store.find(Items, { where: { name: "secret-name" } })),
    count: Effect.flip(store.count(Items)),
    walk: Effect.flip(Stream.runDrain(store.walk(Items))),
    insert: Effect.flip(store.insert(Items, item("t", "secret-name", 1))),
    insertMany: Effect.flip(store.insertMany(Items, [item("t", "a", 1), item("t", "b", 2)])),
    update: Effect.flip(store.update(Items, "secret-id", { price: 2 })),
    delete: Effect.flip(store.delete(Items, "secret-id")),
    transaction: Effect.flip(store.transaction(store.insert(Items, item("t", "c", 3))))
  })

const dropDatabase = (url: string) =>
  Effect.promise(async () => {
    const admin = new pg.Client({ connectionString: Pg.serverUrl! })
    await admin.connect()
    await admin.query(`DROP DATABASE ${new URL(url).pathname.slice(1)} WITH (FORCE)`)
    await admin.end()
  })

const pgStore = (url: string) =>
  Effect.flatMap(
    Layer.build(Store.layerSql.pipe(
      Layer.provideMerge(RecordingTap.layer()),
      Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables)).pipe(Layer.provideMerge(Pg.layerClient(url))))
    )),
    (context) => Effect.provide(Store.Store, context)
  )

describe.skipIf(Pg.serverUrl === null)("store on a PostgreSQL database that went away", () => {
  it.scopedLive("a transaction whose connection dies fails with StoreUnavailable, not a defect", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const store = yield* pgStore(url)
      const error = yield* Effect.flip(store.transaction(Effect.gen(function*() {
        yield* store.insert(Items, item("t", "first", 1))
        yield* dropDatabase(url)
        yield* store.insert(Items, item("t", "second", 2))
      })))
      assert.strictEqual(error._tag, "StoreUnavailable")
    }))

  it.scopedLive("every operation fails with StoreUnavailable", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const store = yield* pgStore(url)
      yield* store.insert(Items, item("t", "before", 1))
      yield* dropDatabase(url)
      const errors = yield* failureTags(store)
      for (const [operation, error] of Object.entries(errors)) {
        assert.strictEqual(error._tag, "StoreUnavailable", operation)
        assert.notInclude(error.message, "secret", operation)
      }
    }))
})
if (Pg.serverUrl === null) console.warn(Pg.skipReason)

describe("store on a SQLite database opened read-only", () => {
  it.scopedLive("writes fail with StoreUnavailable, reads still work", () =>
    Effect.gen(function*() {
      const file = path.join(mkdtempSync(path.join(tmpdir(), "fw-readonly-")), "store.db")
      yield* SchemaDiffer.apply(tables).pipe(Effect.provide(SqliteClient.layer({ filename: file })))
      const tier = Store.layerSql.pipe(
        Layer.provideMerge(RecordingTap.layer()),
        Layer.provide(SqliteClient.layer({ filename: file, readonly: true }))
      )
      const store = yield* Effect.provide(Store.Store, yield* Layer.build(tier))
      assert.strictEqual(yield* store.count(Items), 0)
      const insert = yield* Effect.flip(store.insert(Items, item("t", "secret-name", 1)))
      assert.strictEqual(insert._tag, "StoreUnavailable")
      assert.include(insert.message, "SQLITE_READONLY")
      assert.notInclude(insert.message, "secret")
      const batch = yield* Effect.flip(store.insertMany(Items, [item("t", "a", 1)]))
      assert.strictEqual(batch._tag, "StoreUnavailable")
    }))
})
