/**
 * The code blocks of README.md and docs/*.md, for the snippet test. A TypeScript block's fence
 * info says what it is:
 *
 * - ` ```ts ` a module: type-checked as written (its imports name `@fw/framework…` as a user would);
 * - ` ```ts run ` a program: type-checked, then run with tsx (it must exit 0);
 * - ` ```ts file=NAME.ts ` a module other blocks of the same page import as `./NAME.js` (shared
 *   declarations, so that the blocks showing an option or an excerpt stay short and still compile).
 *
 * There is no marker for an excerpt that is not compiled: the test refuses any other fence word.
 * ` ```tsx ` blocks are the same, compiled as TSX.
 * Other languages (`sh`, plain text diagrams) are not TypeScript and are not extracted.
 */
import { readdirSync, readFileSync } from "node:fs"
import * as path from "node:path"

/** One TypeScript code block. */
export interface Snippet {
  /** The page, relative to the repository root. */
  readonly page: string
  /** The line of its opening fence (1-based). */
  readonly line: number
  readonly run: boolean
  /** The words of the fence after the language (`run`, `file=NAME.ts`). */
  readonly words: ReadonlyArray<string>
  readonly tsx: boolean
  /** The file name other blocks import it by, when given. */
  readonly file: string | undefined
  readonly code: string
}

/** The pages whose snippets are checked. */
export const pages = (root: string): ReadonlyArray<string> => [
  "README.md",
  ...readdirSync(path.join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
]

/** The TypeScript blocks of one page. */
export const extract = (root: string, page: string): ReadonlyArray<Snippet> => {
  const lines = readFileSync(path.join(root, page), "utf8").split("\n")
  const out: Array<Snippet> = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*(.*)$/.exec(lines[i]!)
    if (open === null) continue
    const start = i
    const body: Array<string> = []
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!)
    const [language, info] = [open[1]!, open[2]!.trim()]
    if (language !== "ts" && language !== "tsx" && language !== "typescript") continue
    const words = info.split(/\s+/).filter((word) => word.length > 0)
    out.push({
      page,
      line: start + 1,
      run: words.includes("run"),
      words,
      tsx: language === "tsx",
      file: words.find((word) => word.startsWith("file="))?.slice("file=".length),
      code: body.join("\n") + "\n"
    })
  }
  return out
}

/** The file a snippet is written to. */
export const fileName = (snippet: Snippet): string =>
  snippet.file ?? `${snippet.page.replace(/\.md$/, "").replace(/[^A-Za-z0-9]/g, "_")}_L${snippet.line}.${snippet.tsx ? "tsx" : "ts"}`
