/**
 * `fw dev` discovers the standing primitives' files (spec 2.14) as it does `*.aggregate.ts`: a real
 * CLI process on SQLite serves the entry folder's `*.expectation.ts` and `*.budget.ts` files (their
 * tables applied, their state on the inspect surface), restarts when a new one appears, and refuses
 * a file whose default export is not its definition with one line; `fw db apply` refuses it too.
 */
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"

const bin = path.resolve("bin/fw.js")
const token = "standing-cli-secret"
const src = path.resolve("src")

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")))
    })
  })

/** Resolves once `output()` satisfies `predicate`, rejects if the process exits first or after 120 s (a loaded machine). */
const until = (child: ChildProcess, output: () => string, predicate: (text: string) => boolean, what: string) =>
  new Promise<void>((resolve, reject) => {
    const started = Date.now()
    const onExit = (code: number | null) => reject(new Error(`fw dev exited (${code}) before ${what}:\n${output()}`))
    child.once("exit", onExit)
    const poll = () => {
      if (predicate(output())) {
        child.off("exit", onExit)
        resolve()
      } else if (Date.now() - started > 120_000) reject(new Error(`no ${what} within 120 s:\n${output()}`))
      else setTimeout(poll, 100)
    }
    poll()
  })

const inspect = async (base: string, route: string) => {
  const response = await fetch(`${base}/_fw/inspect/plugins/standing${route}`, { headers: { authorization: `Bearer ${token}` } })
  return { status: response.status, body: await response.json() as unknown }
}

/** An entry folder under the repository (its files import the sources by relative path). */
const appFolder = () => {
  const dir = mkdtempSync(path.join(path.resolve("test/standing"), "cli-app-"))
  const from = (module: string) => JSON.stringify(path.relative(dir, path.join(src, module)).replace(/\\/g, "/"))
  writeFileSync(path.join(dir, "app.ts"), `
import { Schema } from "effect"
import { defineApp } from ${from("app/App.js")}
import { defineTable } from ${from("kernel/schema/Table.js")}
export const Orders = defineTable("orders", { fields: { status: Schema.String, placedAt: Schema.Number } })
export const app = defineApp({ name: "cli-standing", tables: [Orders] })
`)
  writeFileSync(path.join(dir, "main.ts"), `
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Layer } from "effect"
import * as ChangeTap from ${from("kernel/changes/ChangeTap.js")}
import * as Store from ${from("kernel/store/Store.js")}
import { defineEntry } from ${from("server/Entry.js")}
import { app } from "./app.js"
export default defineEntry({
  app,
  store: Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provideMerge(SqliteClient.layer({ filename: process.env.FW_TEST_DB! })))
})
`)
  mkdirSync(path.join(dir, "quality"))
  writeFileSync(path.join(dir, "quality", "orders-rows.expectation.ts"), `
import { defineExpectation } from ${from("standing/index.js").replace(/^"/, "\"../")}
import { Orders } from "../app.js"
export default defineExpectation({ name: "orders-rows", on: { table: Orders }, invariant: { kind: "rowCount", min: 1 } })
`)
  writeFileSync(path.join(dir, "tokens.budget.ts"), `
import { defineCostBudget } from ${from("standing/index.js")}
export default defineCostBudget({ name: "tokens", unit: "tokens", limit: 1000, window: "day" })
`)
  return { dir, from }
}

describe("fw CLI: standing primitives' files", () => {
  it("fw dev serves *.expectation.ts and *.budget.ts, restarts for a new file, refuses a wrong default export in one line", async () => {
    const { dir, from } = appFolder()
    const db = path.join(mkdtempSync(path.join(tmpdir(), "fw-standing-cli-")), "app.db")
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    let output = ""
    const child = spawn(process.execPath, [bin, "dev", path.join(dir, "main.ts")], {
      env: { ...process.env, FW_TEST_DB: db, PORT: String(port), FW_INSPECT_TOKEN: token },
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.stdout.on("data", (chunk) => output += String(chunk))
    child.stderr.on("data", (chunk) => output += String(chunk))
    try {
      await until(child, () => output, (text) => text.includes("standing primitives from files: expectations orders-rows; budgets tokens"), "the discovered files")
      await until(child, () => output, (text) => text.includes(`:${port}`), "serving")
      const expectations = await inspect(base, "/expectations")
      assert.strictEqual(expectations.status, 200)
      assert.deepInclude((expectations.body as ReadonlyArray<Record<string, unknown>>)[0], { name: "orders-rows", status: "violated" })
      const budgets = await inspect(base, "/budgets")
      assert.include(JSON.stringify(budgets.body), "\"tokens\"")
      // Their tables were applied on the dev boot.
      const sqlite = new Database(db, { readonly: true })
      try {
        const names = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '_fw_%' ORDER BY name").all()
        assert.includeDeepMembers(names, [{ name: "_fw_cost_events" }, { name: "_fw_expectation_state" }])
      } finally {
        sqlite.close()
      }

      // A new file restarts the server with it.
      writeFileSync(path.join(dir, "checkout.experiment.ts"), `
import { defineExperiment } from ${from("standing/index.js")}
import { Orders } from "./app.js"
export default defineExperiment({
  name: "checkout", on: { table: Orders }, subject: "status",
  variants: [{ name: "a" }, { name: "b" }],
  metric: { kind: "count" }
})
`)
      await until(child, () => output, (text) => text.includes("experiments checkout"), "the restart with the new file")

      // A file whose default export is not its definition: one line, naming the file and the expected call.
      const before = output.length
      writeFileSync(path.join(dir, "wrong.budget.ts"), `
import { defineExpectation } from ${from("standing/index.js")}
import { Orders } from "./app.js"
export default defineExpectation({ name: "not-a-budget", on: { table: Orders }, invariant: { kind: "rowCount", min: 0 } })
`)
      const refusal = `wrong.budget.ts: the default export must be the return value of defineCostBudget`
      await until(child, () => output, (text) => text.slice(before).includes(refusal), "the refusal")
      // (tsx's own "add in … Restarting" line names the file too; the CLI's refusal is the one `fw:` line.)
      const lines = output.slice(before).split("\n").filter((line) => line.startsWith("fw:") && line.includes("wrong.budget.ts"))
      assert.strictEqual(lines.length, 1, output.slice(before))
      assert.match(lines[0]!, /^fw: .*main\.ts: .*wrong\.budget\.ts: the default export must be the return value of defineCostBudget$/)
    } finally {
      child.kill("SIGTERM")
      await new Promise((resolve) => child.exitCode !== null ? resolve(undefined) : child.once("exit", resolve))
      rmSync(dir, { recursive: true, force: true })
    }
  }, 300_000)
})
