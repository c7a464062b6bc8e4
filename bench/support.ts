/**
 * Benchmark helpers: a server in its own process, autocannon runs, a store tier, a fresh
 * PostgreSQL database, and table printing.
 */
import type { SqlClient } from "@effect/sql"
import autocannon from "autocannon"
import { Layer } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import * as ChangeTap from "../src/kernel/ChangeTap.js"
import * as SchemaDiffer from "../src/kernel/SchemaDiffer.js"
import * as Store from "../src/kernel/Store.js"
import type * as Table from "../src/kernel/Table.js"

const here = path.dirname(fileURLToPath(import.meta.url))

/** Starts `bench/<file>` with tsx in a child process and resolves with its printed port. */
export const startServer = (file: string): Promise<{ readonly port: number; readonly stop: () => void }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(here, file)], { stdio: ["ignore", "pipe", "inherit"] })
    child.stdout.on("data", (data: Buffer) => {
      const match = /PORT (\d+)/.exec(data.toString())
      if (match) resolve({ port: Number(match[1]), stop: () => child.kill() })
    })
    child.on("exit", (code) => reject(new Error(`bench server exited with ${code}`)))
  })

/** Requests per second of one autocannon run. */
export const load = async (options: autocannon.Options): Promise<number> => {
  const result = await autocannon({ connections: 32, duration: 5, ...options })
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${options.url}: ${result.non2xx} non-2xx, ${result.errors} errors`)
  return result.requests.average
}

/** Prints rows as an aligned table. */
export const table = (title: string, rows: ReadonlyArray<Record<string, string | number>>) => {
  console.log(`\n${title}`)
  console.table(rows)
}

/** Formats a number of operations per second. */
export const perSecond = (n: number) => Math.round(n).toLocaleString("en-US")

/** The PostgreSQL server benchmarks create their databases on (`FW_TEST_PG_URL`). */
export const pgServerUrl = process.env.FW_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** Creates an empty database named `<prefix>_<random>` on `pgServerUrl`: its URL and how to drop it. */
export const freshPgDatabase = async (prefix: string): Promise<{ readonly url: string; readonly drop: () => Promise<void> }> => {
  const name = `${prefix}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`
  const admin = new pg.Client({ connectionString: pgServerUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(pgServerUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => {
      const again = new pg.Client({ connectionString: pgServerUrl })
      await again.connect()
      await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await again.end()
    }
  }
}

/**
 * A store with a local change tap: in memory when `client` is null, else SQL on `client` with
 * `tables` created first.
 */
export const storeTier = (client: Layer.Layer<SqlClient.SqlClient, unknown> | null, tables: ReadonlyArray<Table.Any>) =>
  client === null
    ? Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
    : Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables)).pipe(Layer.provideMerge(client)))
    )
