import { SqliteClient } from "@effect/sql-sqlite-node"
import { describe, it } from "@effect/vitest"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as Pg from "../support/Pg.js"
import { memoryTier, sqlTier } from "./fixtures.js"
import { conformance } from "./suite.js"

conformance("memory", memoryTier)
conformance("sqlite (in memory)", sqlTier(SqliteClient.layer({ filename: ":memory:" })))
conformance(
  "sqlite (file)",
  sqlTier(SqliteClient.layer({ filename: path.join(mkdtempSync(path.join(tmpdir(), "fw-store-")), "store.db") }))
)
if (Pg.serverUrl !== null) {
  conformance("postgresql", sqlTier(Pg.layerFreshClient))
} else {
  describe("store conformance: postgresql", () => {
    it("is skipped", () => console.warn(Pg.skipReason))
  })
}
