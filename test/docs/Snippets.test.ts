/**
 * Every TypeScript block of README.md and docs/*.md (see `snippets.ts` for the fence markers) is
 * written to a folder of its page, type-checked against the sources as `@fw/framework…` (strict,
 * the repository's compiler options), and the `ts run` ones are run with tsx: a snippet cannot rot.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import ts from "typescript"
import { extract, fileName, pages, type Snippet } from "./snippets.js"

const root = path.resolve(".")
const all = pages(root).flatMap((page) => extract(root, page))

/**
 * `@fw/framework…` as the package exports it (package.json `exports`), mapped to the sources (each
 * entry's `@fw/source` condition): a snippet can import only what a user of the package can.
 */
const exported = (): ts.MapLike<Array<string>> => {
  const exports = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).exports as Record<string, unknown>
  return Object.fromEntries(
    Object.entries(exports).flatMap(([subpath, target]) => {
      const source = typeof target === "object" && target !== null ? (target as Record<string, unknown>)["@fw/source"] : undefined
      return typeof source === "string" ? [[`@fw/framework${subpath.slice(1)}`, [path.join(root, source)]]] : []
    })
  )
}

/** Compiler options of the repository, with `@fw/framework…` mapped to the sources. */
const options = (dir: string): ts.CompilerOptions => {
  const base = ts.readConfigFile(path.join(root, "tsconfig.base.json"), ts.sys.readFile)
  const parsed = ts.parseJsonConfigFileContent(base.config, ts.sys, root)
  return {
    ...parsed.options,
    noEmit: true,
    jsx: ts.JsxEmit.ReactJSX,
    // A snippet shows a piece of an app: names it declares for the reader may go unused.
    noUnusedLocals: false,
    noUnusedParameters: false,
    baseUrl: dir,
    paths: exported()
  }
}

describe("README and docs snippets", () => {
  it("every TypeScript block is a complete snippet: none is marked to be skipped", () => {
    // Fence words other than `run` and `file=` (a former `fragment`, a typo) would be ignored silently.
    const unknown = all.flatMap((snippet) => snippet.words.filter((word) => word !== "run" && !word.startsWith("file=")).map((word) => `${snippet.page}:${snippet.line}: ${word}`))
    assert.deepStrictEqual(unknown, [])
  })

  it("every block type-checks", async () => {
    // Under the repository, so packages resolve as they do for the tests.
    const dir = mkdtempSync(path.join(root, "test/docs/snippets-"))
    try {
      const files = new Map<string, Snippet>()
      for (const snippet of all) {
        const folder = path.join(dir, snippet.page.replace(/[^A-Za-z0-9]/g, "_"))
        mkdirSync(folder, { recursive: true })
        const file = path.join(folder, fileName(snippet))
        writeFileSync(file, snippet.code)
        files.set(file, snippet)
      }
      const program = ts.createProgram([...files.keys()], options(dir))
      // One file at a time, the event loop let through between them: checked in one go, the
      // program held the worker's loop past vitest's rpc timeout on a busy machine.
      const problems: Array<string> = []
      for (const [file, snippet] of files) {
        await new Promise((resolve) => setImmediate(resolve))
        for (const diagnostic of ts.getPreEmitDiagnostics(program, program.getSourceFile(file))) {
          if (diagnostic.file === undefined || path.resolve(diagnostic.file.fileName) !== file) continue
          const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0)
          problems.push(`${snippet.page}:${snippet.line + 1 + line}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`)
        }
      }
      assert.deepStrictEqual(problems, [])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 180_000)

  it("the ts run blocks run and exit 0", async () => {
    const programs = all.filter((snippet) => snippet.run)
    assert.isAbove(programs.length, 0)
    const dir = mkdtempSync(path.join(root, "test/docs/run-"))
    try {
      writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({
        extends: path.join(root, "tsconfig.base.json"),
        compilerOptions: { baseUrl: ".", paths: options(dir).paths }
      }))
      for (const snippet of programs) {
        const file = path.join(dir, fileName(snippet))
        writeFileSync(file, snippet.code)
        const tsx = path.join(root, "node_modules/tsx/dist/cli.mjs")
        await promisify(execFile)(process.execPath, [tsx, "--tsconfig", path.join(dir, "tsconfig.json"), file], { cwd: dir }).catch(
          (error: { stderr: string }) => assert.fail(`${snippet.page}:${snippet.line} failed:\n${error.stderr}`)
        )
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)
})
