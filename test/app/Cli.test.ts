import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { execFile, spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
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

  it("--help lists every command with its description", async () => {
    const help = (await run(process.execPath, [bin, "--help"])).stdout.replace(/\x1b\[[0-9;]*m/g, "")
    for (const line of [
      /- dev <entry> +apply the schema, then serve the app with request logs, restarting when a file changes/,
      /- serve <entry> +serve the app/,
      /- db apply \[--dry-run\] <entry> +create the missing tables, columns and indexes/,
      /- search reindex <entry> <index> +rebuild a search index/,
      /- init <dir> +scaffold an app/
    ]) assert.match(help, line)
  }, 60_000)

  it("user errors are one line and exit 1: an unset secret, a missing argument, a file that is not an entry (not run), a CommonJS folder", async () => {
    const folder = appFolder()
    // The README's main.ts shape: it launches a server at the top level and has no entry export.
    writeFileSync(path.join(folder, "main.ts"), `import { writeFileSync } from "node:fs"\nwriteFileSync(${JSON.stringify(path.join(folder, "ran"))}, "")\n`)
    const cjs = path.join(folder, "cjs")
    mkdirSync(cjs)
    writeFileSync(path.join(cjs, "package.json"), JSON.stringify({ name: "cjs-app" }))
    writeFileSync(path.join(cjs, "entry.ts"), "export default defineEntry({ app, store })\n")
    const src = (module: string) => JSON.stringify(path.resolve("src", module))
    writeFileSync(path.join(folder, "entry.ts"), [
      `import { defineApp } from ${src("app/App.ts")}`,
      `import * as Settings from ${src("app/Settings.ts")}`,
      `import { defineEntry } from ${src("server/Entry.ts")}`,
      `import { memory } from ${JSON.stringify(path.resolve("test/client/fixtures.ts"))}`,
      `const secret = Settings.secretFromEnv("SESSION_SECRET")`,
      `export default defineEntry({ app: defineApp({ name: secret.slice(0, 0) + "app" }), store: memory })`,
      ``
    ].join("\n"))
    const { SESSION_SECRET: _, ...withoutSecret } = process.env
    const unset = await failure([bin, "serve", path.join(folder, "entry.ts")], withoutSecret)
    assert.deepStrictEqual(unset.lines, [
      `fw: ${path.join(folder, "entry.ts")}: SESSION_SECRET must be set to a secret of at least 32 bytes (e.g. the output of \`openssl rand -base64 48\`)`
    ])
    assert.strictEqual(unset.code, 1)
    const missing = await failure([bin, "dev"])
    const notEntry = await failure([bin, "serve", path.join(folder, "main.ts")])
    const commonJs = await failure([bin, "db", "apply", path.join(cjs, "entry.ts")])
    assert.deepStrictEqual(missing, { code: 1, lines: ["Missing argument <entry>"] })
    assert.strictEqual(notEntry.code, 1)
    assert.strictEqual(notEntry.lines.length, 1)
    assert.match(notEntry.lines[0]!, /^fw: .*main\.ts: not an entry module: its default export must be defineEntry\(\{app, store\}\) \(the file was not run/)
    assert.isFalse(existsSync(path.join(folder, "ran")), "the CLI evaluated a file that is not an entry")
    assert.strictEqual(commonJs.code, 1)
    assert.strictEqual(commonJs.lines.length, 1)
    assert.include(commonJs.lines[0]!, `add "type": "module"`)
  }, 60_000)

  it("fw dev serves, prints the startup line, and restarts when the entry changes", async () => {
    const folder = appFolder()
    const entryFile = path.join(folder, "entry.ts")
    const src = (module: string) => JSON.stringify(path.resolve("src", module))
    // Outside the repository (packages do not resolve there): the entry imports by absolute path.
    writeFileSync(entryFile, [
      `import { defineApp } from ${src("app/App.ts")}`,
      `import { defineEntry } from ${src("server/Entry.ts")}`,
      `import { memory } from ${JSON.stringify(path.resolve("test/client/fixtures.ts"))}`,
      `export default defineEntry({ app: defineApp({ name: "watched" }), store: memory })`,
      ``
    ].join("\n"))
    const child = spawn(process.execPath, [bin, "dev", entryFile], {
      env: { ...process.env, PORT: String(40_000 + (process.pid % 20_000)) },
      detached: true
    })
    let output = ""
    const waitFor = (count: number) =>
      new Promise<void>((resolve, reject) => {
        // Before the test's own timeout, so the finally below always stops the processes.
        const deadline = Date.now() + 40_000
        const check = () => {
          if ((output.match(/fw: serving watched on http:\/\/127\.0\.0\.1:\d+ \(docs at \/docs\)/g) ?? []).length >= count) resolve()
          else if (child.exitCode !== null) reject(new Error(`fw dev exited: ${output}`))
          else if (Date.now() > deadline) reject(new Error(`fw dev printed ${count} startup line(s) late: ${output}`))
          else setTimeout(check, 100)
        }
        check()
      })
    child.stdout.on("data", (chunk: Buffer) => output += chunk.toString())
    child.stderr.on("data", (chunk: Buffer) => output += chunk.toString())
    try {
      await waitFor(1)
      writeFileSync(entryFile, readFileSync(entryFile, "utf8") + "// changed\n")
      await waitFor(2)
    } finally {
      // The watcher and the server it runs: the whole process group.
      if (child.pid !== undefined) process.kill(-child.pid, "SIGTERM")
    }
  }, 90_000)
})

/**
 * A fresh ES-module app folder in the system's temporary directory (not under a dot-folder, which
 * `tsx watch` does not watch).
 */
const appFolder = () => {
  const folder = mkdtempSync(path.join(tmpdir(), "fw-app-"))
  writeFileSync(path.join(folder, "package.json"), JSON.stringify({ name: "app", type: "module" }))
  return folder
}

/** Runs the CLI expecting failure: its exit code and its non-empty output lines. */
const failure = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = process.env) =>
  run(process.execPath, [...args], { env }).then(
    () => ({ code: 0, lines: [] as Array<string> }),
    (error: { stdout: string; stderr: string; code: number }) => ({
      code: error.code,
      lines: `${error.stdout}${error.stderr}`.split("\n").filter((line) => line.trim().length > 0)
    })
  )
