/**
 * Scratch PostgreSQL databases for benchmarks: one per run, dropped at the end.
 */
import pg from "pg"

/** The server benchmarks use (`FW_TEST_PG_URL`, else the local one). */
export const pgUrl = process.env.FW_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** A database of its own and how to drop it. */
export interface ScratchDatabase {
  readonly url: string
  readonly drop: () => Promise<void>
}

const admin = async <A>(f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: pgUrl })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

/** Creates a fresh database named `fw_bench_<prefix>_…` on the benchmark server. */
export const scratchDatabase = async (prefix: string): Promise<ScratchDatabase> => {
  const name = `fw_bench_${prefix}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`
  await admin((client) => client.query(`CREATE DATABASE ${name}`))
  const url = new URL(pgUrl)
  url.pathname = `/${name}`
  return { url: url.toString(), drop: () => admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined) }
}

/** True when the benchmark server answers (a run without PostgreSQL skips its PostgreSQL rows). */
export const pgReachable = (): Promise<boolean> => admin(() => Promise.resolve(true)).catch(() => false)
