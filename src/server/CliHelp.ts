/**
 * The CLI's help page, apart from the commands themselves so that `fw --help` prints it without
 * loading the framework (seconds on a busy machine).
 */

/** The CLI's version. */
export const version = "0.1.0"

/** What the CLI is for. */
export const summary = "serve an fw app, manage its database and indexes, scaffold a new one"

/** Every command the CLI runs: its usage and what it does (the help lists each once). */
export const commands = [
  ["dev", "<entry>", "apply the schema, then serve the app with request logs, restarting when a file changes"],
  ["serve", "<entry>", "serve the app"],
  ["db apply", "[--dry-run] <entry>", "create the missing tables, columns and indexes"],
  ["search reindex", "<entry> <index>", "rebuild a search index from its table into a fresh index, then swap it in"],
  ["init", "<dir>", "scaffold an app (entry, one table, procedures, a test) in a new directory"]
] as const

/**
 * `fw --help` (and `fw` alone): plain text, each command once. @effect/cli's own page would list
 * the command groups (`db`, `search`) beside their commands and its built-in options first.
 */
export const help = (version: string): string => {
  const usages = commands.map(([name, args]) => `${name} ${args}`)
  const width = Math.max(...usages.map((usage) => usage.length)) + 2
  return [
    `fw ${version}: ${summary}`,
    "",
    "USAGE",
    "  fw <command> [arguments]",
    "",
    "COMMANDS",
    ...commands.map(([, , description], i) => `  ${usages[i]!.padEnd(width)}${description}`),
    "",
    "<entry> is a module whose default export is defineEntry({app, store}). PORT sets the port of dev and",
    "serve (default: the entry's port, else 3000). `fw <command> --help` describes one command;",
    "`fw --version` prints the version.",
    ""
  ].join("\n")
}
