/**
 * Every TypeScript block of README.md and docs/*.md (see `snippets.ts` for the fence markers) is
 * written to a folder of its page, type-checked against the sources as `@fw/framework…` (strict,
 * the repository's compiler options), and the `ts run` ones are run with tsx: a snippet cannot rot.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import ts from "typescript"
import { extract, fileName, pages, type Snippet } from "./snippets.js"

const root = path.resolve(".")
const all = pages(root).flatMap((page) => extract(root, page))

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
    paths: {
      "@fw/framework": [path.join(root, "src/index.ts")],
      // The one subpath export that is not an area's index (package.json "exports").
      "@fw/framework/search/errors": [path.join(root, "src/search/Errors.ts")],
      "@fw/framework/*": [path.join(root, "src/*/index.ts")]
    }
  }
}

describe("README and docs snippets", () => {
  const checked = all.filter((snippet) => !snippet.fragment)
  const fragments = all.filter((snippet) => snippet.fragment)

  it("every block that is not marked a fragment type-checks", () => {
    // Under the repository, so packages resolve as they do for the tests.
    const dir = mkdtempSync(path.join(root, "test/docs/snippets-"))
    try {
      const files = new Map<string, Snippet>()
      for (const snippet of checked) {
        const folder = path.join(dir, snippet.page.replace(/[^A-Za-z0-9]/g, "_"))
        mkdirSync(folder, { recursive: true })
        const file = path.join(folder, fileName(snippet))
        writeFileSync(file, snippet.code)
        files.set(file, snippet)
      }
      const program = ts.createProgram([...files.keys()], options(dir))
      const problems = ts.getPreEmitDiagnostics(program)
        .filter((diagnostic) => diagnostic.file !== undefined && files.has(path.resolve(diagnostic.file.fileName)))
        .map((diagnostic) => {
          const snippet = files.get(path.resolve(diagnostic.file!.fileName))!
          const { line } = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start ?? 0)
          return `${snippet.page}:${snippet.line + 1 + line}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`
        })
      assert.deepStrictEqual(problems, [])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 180_000)

  it("the ts run blocks run and exit 0", async () => {
    const programs = checked.filter((snippet) => snippet.run)
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

  it("fragments are few and listed: their number may only go down", () => {
    // Excerpts still to be turned into complete modules; printed so a reader sees what is unchecked.
    if (fragments.length > 0) {
      console.info(`[fw tests] ${fragments.length} snippet fragments not compiled: ${fragments.map((s) => `${s.page}:${s.line}`).join(", ")}`)
    }
    assert.isAtMost(fragments.length, maxFragments)
  })
})

/** Lower this as fragments become modules; never raise it. */
const maxFragments = 24
