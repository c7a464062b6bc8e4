/**
 * Benchmark helpers: a server in its own process, autocannon runs, a store tier, and table
 * printing.
 */
import type { SqlClient } from "@effect/sql"
import autocannon from "autocannon"
import { Layer } from "effect"
import { spawn } from "node:child_process"
import type * as http from "node:http"
import { request as httpRequest } from "node:http"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Pool } from "undici"
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

/** CPU milliseconds a process has used (Linux `/proc`; `NaN` elsewhere or when not visible). */
export const cpuOf = (pid: number) => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return NaN
  }
}

/** CPU milliseconds this process has used. */
export const ownCpu = () => {
  const used = process.cpuUsage()
  return (used.user + used.system) / 1000
}

/**
 * CPU milliseconds used so far by the local PostgreSQL server's processes that work for the
 * database at `url`: its backends (the sampling connection's own included, a few queries) and the
 * server's background processes (WAL writer, checkpointer, autovacuum), by pid. Other databases'
 * backends (another benchmark or test run on the same server) are left out. `serverCpuSince` turns
 * two samples into the time used between them.
 */
export const serverCpu = async (url: string): Promise<ReadonlyMap<number, number>> => {
  const { default: pg } = await import("pg")
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() OR backend_type <> 'client backend'`
    )
    return new Map(rows.map(({ pid }) => [pid, cpuOf(pid)] as const).filter(([, cpu]) => !Number.isNaN(cpu)))
  } finally {
    await client.end()
  }
}

/** The server's CPU between two `serverCpu` samples (a backend that exited meanwhile is left out). */
export const serverCpuSince = (before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>) => {
  let total = 0
  for (const [pid, cpu] of after) total += cpu - (before.get(pid) ?? 0)
  return total
}

const success = Buffer.from(`"exit":{"_tag":"Success"`)

/**
 * A load generator's poster of rpc messages' JSON (`post(url, body)` resolves with whether the call
 * answered success): keep-alive connections (`connections` per origin) driven through undici's
 * `dispatch`, with no response stream per call. On the fleet bench's two shared cores node:http's
 * client took 0.05–0.06 ms of CPU per call against 0.04 here, CPU the replicas then had.
 */
export const rpcPoster = (connections: number) => {
  const pools = new Map<string, Pool>()
  const headers = { "content-type": "application/json" }
  return (url: string, body: string) =>
    new Promise<boolean>((resolve, reject) => {
      const at = new URL(url)
      let pool = pools.get(at.origin)
      if (pool === undefined) pools.set(at.origin, pool = new Pool(at.origin, { connections }))
      let status = 0
      const chunks: Array<Buffer> = []
      pool.dispatch({ path: at.pathname, method: "POST", headers, body }, {
        onConnect: () => undefined,
        onError: reject,
        onHeaders: (statusCode) => {
          status = statusCode
          return true
        },
        onData: (chunk) => {
          chunks.push(chunk)
          return true
        },
        onComplete: () => resolve(status === 200 && Buffer.concat(chunks).includes(success))
      })
    })
}

/** Posts an rpc message's JSON over `agent`; resolves with whether the call answered success. */
export const postRpc = (agent: http.Agent, url: string, body: string) =>
  new Promise<boolean>((resolve, reject) => {
    const request = httpRequest(url, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) }
    }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => void (text += chunk))
      response.on("end", () => resolve(response.statusCode === 200 && text.includes(`"exit":{"_tag":"Success"`)))
    })
    request.on("error", reject)
    request.end(body)
  })
