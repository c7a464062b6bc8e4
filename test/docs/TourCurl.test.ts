/**
 * The README's tour as a user runs it: `main.ts` extracted from the README (its port and database
 * file moved into a temporary folder), started with tsx, then the README's curl lines run by bash
 * against it, each answer compared with the `# …` line under it (`…` stands for any text).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import * as ReadmeTour from "../support/ReadmeTour.js"

const root = path.resolve(".")

describe("README tour", () => {
  it("main.ts runs with tsx and answers the README's curl lines as the README shows", async () => {
    const readme = readFileSync(path.join(root, "README.md"), "utf8")
    const curls = ReadmeTour.block(readme, "## A tour", "sh", /curl/)
    const tour = await ReadmeTour.start()
    try {
      const lines = curls.split("\n")
      const expected = lines.filter((line) => line.startsWith("# ")).map((line) => line.slice(2).replace(/\s+\(status \d+\)$/, ""))
      // Each printing curl line's answer on a line of its own.
      const script = lines
        .filter((line) => line.trim().length > 0 && !line.startsWith("#"))
        .map((line) => line.replaceAll("localhost:3000", new URL(tour.url).host))
        .map((line) => line.startsWith("curl ") ? `${line}; echo` : line)
        .join("\n")
      const { stdout } = await promisify(execFile)("bash", ["-euo", "pipefail", "-c", script], { cwd: tour.dir })
      const answers = stdout.split("\n").filter((line) => line.length > 0)
      assert.strictEqual(answers.length, expected.length, stdout)
      expected.forEach((want, i) => {
        const pattern = new RegExp(`^${want.split("…").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".+")}$`)
        assert.match(answers[i]!, pattern)
      })
    } finally {
      tour.stop()
    }
  }, 180_000)
})
