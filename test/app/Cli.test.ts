import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { execFile } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"

const run = promisify(execFile)
const bin = path.resolve("bin/fw.js")
const entry = path.resolve("test/fixtures/entry.ts")

describe("fw CLI", () => {
  it("db apply --dry-run prints the plan, apply runs it, a second apply has nothing to do", async () => {
    const env = { ...process.env, FW_TEST_DB: path.join(mkdtempSync(path.join(tmpdir(), "fw-cli-")), "app.db") }
    const dry = await run(process.execPath, [bin, "db", "apply", entry, "--dry-run"], { env })
    assert.include(dry.stdout, "would create table notes (id text, tenantId text, text text, rank number)")
    const applied = await run(process.execPath, [bin, "db", "apply", entry], { env })
    assert.include(applied.stdout, "create table notes")
    assert.notInclude(applied.stdout, "would")
    const again = await run(process.execPath, [bin, "db", "apply", entry], { env })
    assert.include(again.stdout, "schema is up to date")
  }, 60_000)

  it("search reindex rebuilds an index from its table and reports progress", async () => {
    const db = path.join(mkdtempSync(path.join(tmpdir(), "fw-cli-")), "app.db")
    const env = { ...process.env, FW_TEST_DB: db }
    const searchEntry = path.resolve("test/fixtures/searchEntry.ts")
    await run(process.execPath, [bin, "db", "apply", searchEntry], { env })
    const sqlite = new Database(db)
    const insert = sqlite.prepare("INSERT INTO notes (id, tenantId, text, rank) VALUES (?, ?, ?, ?)")
    for (let i = 0; i < 25; i++) insert.run(`n${i}`, i % 2 === 0 ? "t1" : "t2", `note number ${i}`, i)
    sqlite.close()
    const reindexed = await run(process.execPath, [bin, "search", "reindex", searchEntry, "notes"], { env })
    assert.include(reindexed.stdout, "100% 25/25 rows")
    assert.include(reindexed.stdout, `reindexed "notes": 25 rows`)
    const unknown = await run(process.execPath, [bin, "search", "reindex", searchEntry, "nope"], { env }).then(
      () => "ran",
      (error: { stderr: string; code: number }) => `${error.code}: ${error.stderr}`
    )
    assert.include(unknown, `no search index "nope"`)
  }, 90_000)

  it("refuses an entry without an app", async () => {
    const failed = await run(process.execPath, [bin, "db", "apply", path.resolve("test/app/fixtures.ts")]).then(
      () => "ran",
      (error: { stderr: string; code: number }) => `${error.code}: ${error.stderr}`
    )
    assert.include(failed, "1: fw:")
    assert.include(failed, "defineEntry")
  }, 60_000)
})
