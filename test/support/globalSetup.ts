/**
 * Finds the PostgreSQL server the PostgreSQL cases run against: `FW_TEST_PG_URL`, else the
 * local default. When none answers, those cases are skipped with a printed reason.
 */
import type { TestProject } from "vitest/node"
import pg from "pg"

const candidate = process.env.FW_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

export default async function setup(project: TestProject) {
  const client = new pg.Client({ connectionString: candidate, connectionTimeoutMillis: 2000 })
  try {
    await client.connect()
    await client.query("SELECT 1")
    project.provide("pgUrl", candidate)
  } catch (error) {
    console.warn(`[fw tests] PostgreSQL at ${candidate} is not reachable (${String(error)}): PostgreSQL cases are skipped.`)
    project.provide("pgUrl", null)
  } finally {
    await client.end().catch(() => undefined)
  }
}

declare module "vitest" {
  export interface ProvidedContext {
    pgUrl: string | null
  }
}
