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
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as ChangeTap from "../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../src/kernel/store/Store.js"
import type * as Table from "../src/kernel/schema/Table.js"

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

/** Options for a child `node`, space-separated in the environment variable `name` (none when unset). */
export const nodeArgsFrom = (name: string): ReadonlyArray<string> => (process.env[name] ?? "").split(" ").filter((arg) => arg !== "")

const success = Buffer.from(`"exit":{"_tag":"Success"`)

/** One kept-alive connection of `rpcPoster`, with at most one call in flight. */
interface PosterConnection {
  readonly socket: net.Socket
  /** What has arrived of the answer so far. */
  received: Buffer
  call: { readonly resolve: (ok: boolean) => void; readonly reject: (error: Error) => void } | undefined
  closed: boolean
}

/** The connections of `rpcPoster` to one host. */
interface PosterOrigin {
  readonly port: number
  readonly hostname: string
  readonly idle: Array<PosterConnection>
  /** Calls waiting for a connection to become idle, or for room to open one. */
  readonly waiting: Array<() => void>
  open: number
}

/**
 * The end of the HTTP/1.1 answer at the start of `data` and whether it answered 200 with a
 * successful rpc exit, once it has all arrived (undefined until then). Bodies by `content-length`
 * or chunked.
 */
const answerIn = (data: Buffer): { readonly end: number; readonly ok: boolean; readonly close: boolean } | undefined => {
  const headEnd = data.indexOf("\r\n\r\n")
  if (headEnd < 0) return undefined
  const head = data.toString("latin1", 0, headEnd).toLowerCase()
  const ok = (body: Buffer) => head.startsWith("http/1.1 200 ") && body.includes(success)
  const close = /\r\nconnection: *close/.test(head)
  const length = /\r\ncontent-length: *(\d+)/.exec(head)
  const bodyStart = headEnd + 4
  if (length !== null) {
    const end = bodyStart + Number(length[1])
    return data.length < end ? undefined : { end, ok: ok(data.subarray(bodyStart, end)), close }
  }
  if (!/\r\ntransfer-encoding: *chunked/.test(head)) throw new Error(`an answer without a length: ${head}`)
  const chunks: Array<Buffer> = []
  let at = bodyStart
  while (true) {
    const sizeEnd = data.indexOf("\r\n", at)
    if (sizeEnd < 0) return undefined
    const size = parseInt(data.toString("latin1", at, sizeEnd), 16)
    const chunkEnd = sizeEnd + 2 + size + 2
    if (data.length < chunkEnd) return undefined
    if (size === 0) return { end: chunkEnd, ok: ok(Buffer.concat(chunks)), close }
    chunks.push(data.subarray(sizeEnd + 2, sizeEnd + 2 + size))
    at = chunkEnd
  }
}

/**
 * A load generator's poster of rpc messages' JSON (`post(url, body)` resolves with whether the call
 * answered success, rejects when its connection failed, for the caller to send it again): at most
 * `connections` kept-alive sockets per host, one call in flight on each, the request written in
 * one `write` and the answer read by its length. The generator shares the two cores with what it
 * measures, so its CPU per call counts: 0.035–0.05 ms against undici's `dispatch` 0.058–0.065 ms in
 * the same run (48 in flight to a bare node:http server), and node:http's client more.
 */
export const rpcPoster = (connections: number) => {
  const origins = new Map<string, PosterOrigin>()
  const empty = Buffer.alloc(0)
  const connect = (origin: PosterOrigin): PosterConnection => {
    const socket = net.connect(origin.port, origin.hostname)
    socket.setNoDelay(true)
    const connection: PosterConnection = { socket, received: empty, call: undefined, closed: false }
    origin.open++
    const gone = (error: Error) => {
      if (connection.closed) return
      connection.closed = true
      origin.open--
      const idleAt = origin.idle.indexOf(connection)
      if (idleAt >= 0) origin.idle.splice(idleAt, 1)
      connection.call?.reject(error)
      connection.call = undefined
      origin.waiting.shift()?.()
    }
    socket.on("error", gone)
    // A socket the server ended (its keep-alive timeout) is never reused: written to before its
    // `close`, it fails with EPIPE, and a retry could pick another such socket.
    socket.on("end", () => gone(new Error("connection ended by the server")))
    socket.on("close", () => gone(new Error("connection closed")))
    socket.on("data", (chunk: Buffer) => {
      connection.received = connection.received.length === 0 ? chunk : Buffer.concat([connection.received, chunk])
      const answer = answerIn(connection.received)
      if (answer === undefined) return
      connection.received = connection.received.length === answer.end ? empty : connection.received.subarray(answer.end)
      const call = connection.call
      connection.call = undefined
      if (answer.close) {
        socket.destroy()
      } else {
        origin.idle.push(connection)
        origin.waiting.shift()?.()
      }
      call?.resolve(answer.ok)
    })
    return connection
  }
  const post = (url: string, body: string): Promise<boolean> => {
    const at = new URL(url)
    let origin = origins.get(at.host)
    if (origin === undefined) {
      origins.set(at.host, origin = { port: Number(at.port), hostname: at.hostname, idle: [], waiting: [], open: 0 })
    }
    const connection = origin.idle.pop() ?? (origin.open < connections ? connect(origin) : undefined)
    if (connection === undefined) return new Promise<void>((ready) => origin.waiting.push(ready)).then(() => post(url, body))
    return new Promise<boolean>((resolve, reject) => {
      connection.call = { resolve, reject }
      connection.socket.write(
        `POST ${at.pathname} HTTP/1.1\r\nhost: ${at.host}\r\ncontent-type: application/json\r\n` +
          `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
      )
    })
  }
  return post
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
