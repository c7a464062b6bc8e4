import { describe, it } from "@effect/vitest"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Layer } from "effect"
import * as Sql from "../../src/search/Sql.js"
import * as Pg from "../support/Pg.js"
import { conformance } from "./conformance/suite.js"

conformance("sql on SQLite", () => Sql.layer.pipe(Layer.provide(SqliteClient.layer({ filename: ":memory:" })), Layer.orDie))
if (Pg.serverUrl !== null) {
  conformance("sql on PostgreSQL", () => Sql.layer.pipe(Layer.provide(Pg.layerFreshClient), Layer.orDie))
} else {
  describe("search backend conformance: sql on PostgreSQL", () => it("is skipped", () => console.warn(Pg.skipReason)))
}
