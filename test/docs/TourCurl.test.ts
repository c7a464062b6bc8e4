/**
 * The README's tour as a user runs it: `main.ts` extracted from the README (its port and database
 * file moved into a temporary folder), started with tsx, then the README's curl lines run by bash
 * against it, each answer compared with the `# …` line under it (`…` stands for any text).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type AddressInfo } from "node:net"
import * as path from "node:path"
import { promisify } from "node:util"

const root = path.resolve(".")

/** The first fenced block of `language` after the heading `heading` whose text matches `contains`. */
const block = (readme: string, heading: string, language: string, contains: RegExp): string => {
  const after = readme.slice(readme.indexOf(heading))
  const fence = new RegExp("^```" + language + "\\n([\\s\\S]*?)^```$", "gm")
  for (const match of after.matchAll(fence)) if (contains.test(match[1]!)) return match[1]!
  throw new Error(`no ${language} block under ${heading}`)
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })

describe("README tour", () => {
  it("main.ts runs with tsx and answers the README's curl lines as the README shows", async () => {
    const readme = readFileSync(path.join(root, "README.md"), "utf8")
    const tour = block(readme, "## A tour", "ts", /defineApp/)
    const curls = block(readme, "## A tour", "sh", /curl/)
    const dir = mkdtempSync(path.join(root, "test/docs/tour-"))
    const port = await freePort()
    // `@fw/framework…` resolved to the sources, as the snippet tests do.
    const exports = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).exports as Record<string, Record<string, string>>
    const paths = Object.fromEntries(Object.entries(exports).flatMap(([subpath, target]) =>
      typeof target["@fw/source"] === "string" ? [[`@fw/framework${subpath.slice(1)}`, [path.join(root, target["@fw/source"])]]] : []))
    writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ extends: path.join(root, "tsconfig.base.json"), compilerOptions: { baseUrl: ".", paths } }))
    assert.include(tour, "port: 3000")
    assert.include(tour, `filename: "app.db"`)
    writeFileSync(path.join(dir, "main.ts"), tour.replace("port: 3000", `port: ${port}`).replace(`filename: "app.db"`, `filename: ${JSON.stringify(path.join(dir, "app.db"))}`))
    const tsx = path.join(root, "node_modules/tsx/dist/cli.mjs")
    const server = spawn(process.execPath, [tsx, "--tsconfig", path.join(dir, "tsconfig.json"), path.join(dir, "main.ts")], {
      cwd: dir,
      env: { ...process.env, SESSION_SECRET: "tour-session-secret-of-at-least-32-bytes" }
    })
    let output = ""
    server.stdout.on("data", (chunk: Buffer) => output += chunk.toString())
    server.stderr.on("data", (chunk: Buffer) => output += chunk.toString())
    try {
      await new Promise<void>((resolve, reject) => {
        const check = () => {
          if (output.includes("fw: serving")) resolve()
          else if (server.exitCode !== null) reject(new Error(`main.ts exited: ${output}`))
          else setTimeout(check, 100)
        }
        check()
      })
      const lines = curls.split("\n")
      const expected = lines.filter((line) => line.startsWith("# ")).map((line) => line.slice(2).replace(/\s+\(status \d+\)$/, ""))
      // Each printing curl line's answer on a line of its own.
      const script = lines
        .filter((line) => line.trim().length > 0 && !line.startsWith("#"))
        .map((line) => line.replaceAll("localhost:3000", `127.0.0.1:${port}`))
        .map((line) => line.startsWith("curl ") ? `${line}; echo` : line)
        .join("\n")
      const { stdout } = await promisify(execFile)("bash", ["-euo", "pipefail", "-c", script], { cwd: dir })
      const answers = stdout.split("\n").filter((line) => line.length > 0)
      assert.strictEqual(answers.length, expected.length, stdout)
      expected.forEach((want, i) => {
        const pattern = new RegExp(`^${want.split("…").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".+")}$`)
        assert.match(answers[i]!, pattern)
      })
    } finally {
      server.kill("SIGTERM")
      rmSync(dir, { recursive: true, force: true })
    }
  }, 180_000)
})
