// Lints served OpenAPI documents with Redocly's recommended rules (@redocly/openapi-core, a dev
// dependency): `node scripts/lint-openapi.mjs URL...`. Prints every problem; exits 1 on any error
// or warning, 0 when every document is clean.
import { createConfig, lintFromString } from "@redocly/openapi-core"

const urls = process.argv.slice(2)
if (urls.length === 0) {
  console.error("usage: node scripts/lint-openapi.mjs URL...")
  process.exit(2)
}
const config = await createConfig({ extends: ["recommended"] })
let problems = 0
for (const url of urls) {
  const response = await fetch(url)
  if (!response.ok) {
    console.error(`lint-openapi: ${url} answered ${response.status}`)
    problems++
    continue
  }
  const found = await lintFromString({ source: await response.text(), absoluteRef: url, config })
  for (const problem of found) {
    console.error(`lint-openapi: ${url}: ${problem.severity} ${problem.ruleId}: ${problem.message} (${problem.location.map((l) => l.pointer).join(", ")})`)
  }
  problems += found.length
  console.log(`lint-openapi: ${url}: ${found.length} problem(s)`)
}
process.exit(problems === 0 ? 0 : 1)
