/**
 * File discovery by suffix: `*.aggregate.ts` (and the standing primitives' `*.expectation.ts`,
 * `*.budget.ts`, `*.experiment.ts`). Walks a folder (the app entry's folder), imports every file
 * whose name ends with the suffix, and keeps the default exports that pass `accept`; a file whose
 * default export does not is an error naming the file (a typo must not silently drop an aggregate).
 */
import { Effect, Schema } from "effect"
import { readdir } from "node:fs/promises"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

/** A discovered file whose default export is not what its suffix promises, or that failed to import. */
export class DiscoveryFailed extends Schema.TaggedError<DiscoveryFailed>()("DiscoveryFailed", {
  file: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.file}: ${this.reason}`
  }
}

/** Folders never walked. */
const skipped: ReadonlySet<string> = new Set(["node_modules", ".git", "dist", "build", "coverage"])

/** Every file under `root` whose name ends with `suffix` (e.g. `.aggregate.ts`), sorted. */
export const findFiles = (root: string, suffix: string): Effect.Effect<ReadonlyArray<string>, DiscoveryFailed> =>
  Effect.tryPromise({
    try: async () => {
      const out: Array<string> = []
      const walk = async (dir: string): Promise<void> => {
        for (const entry of await readdir(dir, { withFileTypes: true })) {
          if (entry.name.startsWith(".") || skipped.has(entry.name)) continue
          const full = path.join(dir, entry.name)
          if (entry.isDirectory()) await walk(full)
          else if (entry.isFile() && entry.name.endsWith(suffix) && !entry.name.endsWith(".d.ts")) out.push(full)
        }
      }
      await walk(root)
      return out.sort()
    },
    catch: (error) => new DiscoveryFailed({ file: root, reason: `cannot list: ${error instanceof Error ? error.message : String(error)}` })
  })

/**
 * Imports every `*<suffix>` file under `root` and returns their default exports, refusing a file
 * whose default export fails `accept` (`what` names the expected export in the error).
 */
export const discover = <A>(
  root: string,
  suffix: string,
  accept: (value: unknown) => value is A,
  what: string
): Effect.Effect<ReadonlyArray<{ readonly file: string; readonly value: A }>, DiscoveryFailed> =>
  Effect.flatMap(findFiles(root, suffix), (files) =>
    Effect.forEach(files, (file) =>
      Effect.tryPromise({
        try: () => import(pathToFileURL(file).href) as Promise<{ readonly default?: unknown }>,
        catch: (error) => new DiscoveryFailed({ file, reason: `import failed: ${error instanceof Error ? error.message : String(error)}` })
      }).pipe(Effect.flatMap((module) =>
        accept(module.default)
          ? Effect.succeed({ file, value: module.default })
          : Effect.fail(new DiscoveryFailed({ file, reason: `the default export must be the return value of ${what}` }))
      ))))
