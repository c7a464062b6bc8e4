import { assert, describe, it } from "@effect/vitest"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Exit, Layer } from "effect"
import * as Sql from "../../src/search/Sql.js"
import * as Pg from "../support/Pg.js"
import { conformance } from "./conformance/suite.js"

conformance("sql on SQLite", () => Sql.layer.pipe(Layer.provide(SqliteClient.layer({ filename: ":memory:" })), Layer.orDie))
if (Pg.serverUrl !== null) {
  conformance("sql on PostgreSQL", () => Sql.layer.pipe(Layer.provide(Pg.layerFreshClient), Layer.orDie))

  describe("sql backend on PostgreSQL: bootstrap", () => {
    it.scoped("replicas starting at the same instant on a fresh database all create the backend's tables", () =>
      Effect.gen(function*() {
        for (let round = 0; round < 4; round++) {
          const url = yield* Pg.freshDatabase
          const exits = yield* Effect.all(
            Array.from({ length: 6 }, () => Effect.exit(Effect.scoped(Effect.provide(Sql.make, Pg.layerClient(url))))),
            { concurrency: "unbounded" }
          )
          for (const exit of exits) assert.isTrue(Exit.isSuccess(exit), Exit.isFailure(exit) ? String(exit.cause) : "")
        }
      }), 120_000)
  })
} else {
  describe("search backend conformance: sql on PostgreSQL", () => it("is skipped", () => console.warn(Pg.skipReason)))
}
