/**
 * `fw init`: the scaffold's files, and a refusal for a non-empty directory. That the scaffold passes
 * its own `npm test` against the packed framework is proven by scripts/pack-check.sh (it needs an
 * install from the registry).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"

const run = promisify(execFile)
const bin = path.resolve("bin/fw.js")

describe("fw init", () => {
  it("scaffolds an entry, a table with procedures, and a test", async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), "fw-init-")), "My App")
    const { stdout } = await run(process.execPath, [bin, "init", dir])
    for (const file of ["package.json", "main.ts", "src/app.ts", "test/app.test.ts"]) assert.include(stdout, file)
    const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as {
      name: string
      scripts: Record<string, string>
      dependencies: Record<string, string>
    }
    assert.strictEqual(pkg.name, "my-app")
    assert.strictEqual(pkg.dependencies["effect"], "^3.22.4")
    assert.include(pkg.scripts["test"], "--test test/app.test.ts")
    assert.include(readFileSync(path.join(dir, "main.ts"), "utf8"), "defineEntry")
    assert.include(readFileSync(path.join(dir, "src/app.ts"), "utf8"), "defineTable(\"tasks\"")
  }, 60_000)

  it("refuses a directory that holds anything, writing nothing", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "fw-init-"))
    writeFileSync(path.join(dir, "keep.txt"), "mine")
    const failed = await run(process.execPath, [bin, "init", dir]).then(
      () => "ran",
      (error: { stderr: string; code: number }) => `${error.code}: ${error.stderr}`
    )
    assert.include(failed, `1: fw: ${dir} exists and is not empty: nothing was written`)
    assert.throws(() => readFileSync(path.join(dir, "package.json")))
  }, 60_000)
})
