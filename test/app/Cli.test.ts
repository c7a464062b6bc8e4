import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { execFile, spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type AddressInfo } from "node:net"
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
  }, 180_000)

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

  it("--help into a pipe is plain text listing each command once, with its description", async () => {
    const [help, bare] = await Promise.all([run(process.execPath, [bin, "--help"]), run(process.execPath, [bin])])
    assert.notMatch(help.stdout, /\x1b\[/, "colour codes printed into a pipe")
    assert.strictEqual(bare.stdout, help.stdout)
    const commands = help.stdout.split("\n").filter((line) => /^  [a-z]/.test(line) && !line.startsWith("  fw "))
    assert.deepStrictEqual(commands.map((line) => line.split("<")[0]!.replace("[--dry-run]", "").trim()), ["dev", "serve", "db apply", "search reindex", "init"])
    for (const line of [
      /^  dev <entry> +apply the schema, then serve the app with request logs, restarting when a file changes$/m,
      /^  serve <entry> +serve the app$/m,
      /^  db apply \[--dry-run\] <entry> +create the missing tables, columns and indexes$/m,
      /^  search reindex <entry> <index> +rebuild a search index/m,
      /^  init <dir> +scaffold an app/m
    ]) assert.match(help.stdout, line)
    // A command's own page (@effect/cli's) is plain in a pipe too.
    const db = await run(process.execPath, [bin, "db", "apply", "--help"])
    assert.include(db.stdout, "create the missing tables, columns and indexes")
    assert.notMatch(db.stdout, /\x1b\[/)
  }, 180_000)

  it("a port in use or out of range is one line and exit 1 for serve and dev (dev does not start watching)", async () => {
    const folder = appFolder()
    const src = (module: string) => JSON.stringify(path.resolve("src", module))
    writeFileSync(path.join(folder, "entry.ts"), [
      `import { defineApp } from ${src("app/App.ts")}`,
      `import { defineEntry } from ${src("server/Entry.ts")}`,
      `import { memory } from ${JSON.stringify(path.resolve("test/client/fixtures.ts"))}`,
      `export default defineEntry({ app: defineApp({ name: "app" }), store: memory })`,
      ``
    ].join("\n"))
    const entryFile = path.join(folder, "entry.ts")
    const holder = createServer()
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve))
    const port = (holder.address() as AddressInfo).port
    try {
      const inUse = `fw: port ${port} is in use (on 127.0.0.1): stop the program listening there, or serve on another port (set PORT to choose it)`
      const outOfRange = "fw: PORT must be a port number from 1 to 65535 (unset or empty for the default)"
      const [serveBusy, devBusy, serveRange, devRange] = await Promise.all([
        failure([bin, "serve", entryFile], { ...process.env, PORT: String(port) }),
        failure([bin, "dev", entryFile], { ...process.env, PORT: String(port) }),
        failure([bin, "serve", entryFile], { ...process.env, PORT: "99999" }),
        failure([bin, "dev", entryFile], { ...process.env, PORT: "99999" })
      ])
      assert.deepStrictEqual(serveBusy, { code: 1, lines: [inUse] })
      assert.deepStrictEqual(devBusy, { code: 1, lines: [inUse] })
      assert.deepStrictEqual(serveRange, { code: 1, lines: [outOfRange] })
      assert.deepStrictEqual(devRange, { code: 1, lines: [outOfRange] })
    } finally {
      holder.close()
    }
  }, 180_000)

  it("a program launched with NodeServer.runMain (the README's main.ts) reports a missing secret, a port in use and a port out of range in one line each, without a stack", async () => {
    // Under the repository, so `@effect/platform-node` resolves to the copy the sources use.
    const folder = mkdtempSync(path.resolve("test/app/tour-"))
    const src = (module: string) => JSON.stringify(path.resolve("src", module))
    // The README tour's shape: the secret read at the top level, the server launched by runMain.
    writeFileSync(path.join(folder, "main.ts"), [
      `import { Layer } from "effect"`,
      `import { createServer } from "node:http"`,
      `import { defineApp } from ${src("app/App.ts")}`,
      `import * as Settings from ${src("app/Settings.ts")}`,
      `import * as NodeServer from ${src("server/NodeServer.ts")}`,
      `import * as Server from ${src("server/Server.ts")}`,
      `import { memory } from ${JSON.stringify(path.resolve("test/client/fixtures.ts"))}`,
      `const secret = Settings.secretFromEnv("SESSION_SECRET")`,
      `const app = defineApp({ name: secret.slice(0, 0) + "app" })`,
      `const Main = Server.layer(app).pipe(Layer.provide(memory), Layer.provide(NodeServer.layer(createServer, { port: Number(process.env.PORT), host: "127.0.0.1" })))`,
      `Layer.launch(Main).pipe(NodeServer.runMain)`,
      ``
    ].join("\n"))
    const tsx = path.resolve("node_modules/tsx/dist/cli.mjs")
    const holder = createServer()
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve))
    const port = (holder.address() as AddressInfo).port
    const { SESSION_SECRET: _, ...withoutSecret } = process.env
    try {
      const [unset, busy, range] = await Promise.all([
        failure([tsx, path.join(folder, "main.ts")], { ...withoutSecret, PORT: String(port) }),
        failure([tsx, path.join(folder, "main.ts")], { ...process.env, SESSION_SECRET: "s".repeat(32), PORT: String(port) }),
        failure([tsx, path.join(folder, "main.ts")], { ...process.env, SESSION_SECRET: "s".repeat(32), PORT: "99999" })
      ])
      assert.deepStrictEqual(unset, {
        code: 1,
        lines: ["fw: SESSION_SECRET must be set to a secret of at least 32 bytes (e.g. the output of `openssl rand -base64 48`)"]
      })
      assert.deepStrictEqual(busy, {
        code: 1,
        lines: [`fw: port ${port} is in use (on 127.0.0.1): stop the program listening there, or serve on another port`]
      })
      assert.deepStrictEqual(range, { code: 1, lines: ["fw: port 99999 is not a port: choose one from 1 to 65535 (0 for any free port)"] })
    } finally {
      holder.close()
      rmSync(folder, { recursive: true, force: true })
    }
  }, 180_000)

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
    // Four independent CLI processes: run side by side, since each pays tsx's start-up.
    const [unset, missing, notEntry, commonJs] = await Promise.all([
      failure([bin, "serve", path.join(folder, "entry.ts")], withoutSecret),
      failure([bin, "dev"]),
      failure([bin, "serve", path.join(folder, "main.ts")]),
      failure([bin, "db", "apply", path.join(cjs, "entry.ts")])
    ])
    assert.deepStrictEqual(unset.lines, [
      `fw: ${path.join(folder, "entry.ts")}: SESSION_SECRET must be set to a secret of at least 32 bytes (e.g. the output of \`openssl rand -base64 48\`)`
    ])
    assert.strictEqual(unset.code, 1)
    assert.deepStrictEqual(missing, { code: 1, lines: ["Missing argument <entry>"] })
    assert.strictEqual(notEntry.code, 1)
    assert.strictEqual(notEntry.lines.length, 1)
    assert.match(notEntry.lines[0]!, /^fw: .*main\.ts: not an entry module: its default export must be defineEntry\(\{app, store\}\) \(the file was not run/)
    assert.isFalse(existsSync(path.join(folder, "ran")), "the CLI evaluated a file that is not an entry")
    assert.strictEqual(commonJs.code, 1)
    assert.strictEqual(commonJs.lines.length, 1)
    assert.include(commonJs.lines[0]!, `add "type": "module"`)
  }, 120_000)

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
