/**
 * Redocly's linter (`@redocly/openapi-core`, the library behind `redocly lint`) with its
 * `recommended` rules, as an independent check of the documents fw serves.
 */
import { createConfig, lintFromString } from "@redocly/openapi-core"

/** The problems Redocly's recommended rules find in `document` (fetched from `url`), one line each. */
export const lint = async (document: unknown, url: string): Promise<ReadonlyArray<string>> => {
  const config = await createConfig({ extends: ["recommended"] })
  const problems = await lintFromString({ source: JSON.stringify(document), absoluteRef: url, config })
  return problems.map((problem) =>
    `${problem.severity} ${problem.ruleId}: ${problem.message} (${problem.location.map((location) => location.pointer).join(", ")})`
  )
}
