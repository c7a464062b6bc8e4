/**
 * `fw dev` serves the `*.aggregate.ts` files found under the entry's folder (spec 2.13): a real
 * CLI process on SQLite, its aggregates listed and refreshed through the inspect routes, an
 * incremental one kept by writes made through the app.
 */
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"

const bin = path.resolve("bin/fw.js")
const entry = path.resolve("test/aggregates/fixtures/cli-app/main.ts")
const token = "cli-inspect-secret"

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")))
    })
  })

const call = async (base: string, method: "GET" | "POST", route: string, body?: unknown) => {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, body: (text === "" ? {} : JSON.parse(text)) as Record<string, unknown> }
}

/** Resolves once the process answers `/_fw/health`, rejects if it exits first. */
const ready = (child: ChildProcess, base: string, output: () => string) =>
  new Promise<void>((resolve, reject) => {
    let done = false
    child.once("exit", (code) => {
      if (!done) reject(new Error(`fw dev exited (${code}) before serving:\n${output()}`))
    })
    const poll = () => {
      if (done) return
      fetch(`${base}/_fw/health`).then(
        (response) => {
          if (response.ok) {
            done = true
            resolve()
          } else setTimeout(poll, 100)
        },
        () => setTimeout(poll, 100)
      )
    }
    poll()
  })

describe("fw CLI: aggregate files", () => {
  it("fw dev registers the entry folder's *.aggregate.ts files on SQLite: listed, refreshed and maintained", async () => {
    const db = path.join(mkdtempSync(path.join(tmpdir(), "fw-agg-cli-")), "app.db")
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    let output = ""
    const child = spawn(process.execPath, [bin, "dev", entry], {
      env: { ...process.env, FW_TEST_DB: db, PORT: String(port), FW_INSPECT_TOKEN: token },
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.stdout.on("data", (chunk) => output += String(chunk))
    child.stderr.on("data", (chunk) => output += String(chunk))
    try {
      await ready(child, base, () => output)
      assert.include(output, "aggregates from *.aggregate.ts: perStatus, revenue")

      for (const [status, amount] of [["open", 5], ["open", 7], ["late", 2]] as const) {
        assert.strictEqual((await call(base, "POST", "/_fw/inspect/invoke", { tag: "orders.add", input: { status, amount } })).status, 200)
      }
      const refreshed = await call(base, "POST", "/_fw/inspect/aggregates/perStatus/refresh")
      assert.strictEqual(refreshed.status, 200)
      assert.strictEqual(refreshed.body.outcome, "refreshed")

      const listed = await call(base, "GET", "/_fw/inspect/aggregates")
      assert.strictEqual(listed.status, 200)
      const byName = new Map((listed.body.aggregates as ReadonlyArray<Record<string, unknown>>).map((a) => [a.name, a]))
      assert.deepStrictEqual([...byName.keys()].sort(), ["perStatus", "revenue"])
      assert.strictEqual((byName.get("perStatus")!.meta as Record<string, unknown>).rowCount, 2)
      assert.strictEqual(byName.get("revenue")!.kind, "incremental")
      assert.strictEqual((byName.get("revenue")!.meta as Record<string, unknown>).rowCount, 2)

      // Stored in the entry's database: the maintained groups and the declared index.
      const sqlite = new Database(db, { readonly: true })
      try {
        const groups = sqlite.prepare("SELECT key, s FROM _fw_aggregate_rows WHERE aggregate = 'revenue' AND generation = 0 ORDER BY key").all()
        assert.deepStrictEqual(groups, [{ key: `["late"]`, s: 2 }, { key: `["open"]`, s: 12 }])
        const indexes = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE '%perStatus%'").all()
        assert.strictEqual(indexes.length, 1)
      } finally {
        sqlite.close()
      }
    } finally {
      child.kill("SIGTERM")
    }
  }, 90_000)

  it("fw db apply creates the aggregates' tables when the entry has aggregate files", async () => {
    const db = path.join(mkdtempSync(path.join(tmpdir(), "fw-agg-cli-")), "app.db")
    const applied = await promisify(execFile)(process.execPath, [bin, "db", "apply", entry], { env: { ...process.env, FW_TEST_DB: db } })
    assert.include(applied.stdout, "create table _fw_aggregate_meta")
    assert.include(applied.stdout, "create table _fw_aggregate_rows")
  }, 60_000)
})
