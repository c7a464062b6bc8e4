/**
 * REST benchmark helpers: a server in its own process (so client and server do not share a
 * core's event loop), autocannon runs, medians and table printing.
 */
import autocannon from "autocannon"
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))

/** A running server process. */
export interface ServerProcess {
  readonly port: number
  readonly stop: () => void
  /** The CPU time (user + system) the process has used so far, in µs. */
  readonly cpuMicros: () => number
}

/** CPU time of a Linux process from `/proc/<pid>/stat` (utime + stime, in clock ticks of 10 ms). */
export const processCpuMicros = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 10_000
}

/** Starts `bench/http/<file>` with tsx in a child process; resolves with the port it prints. */
export const startServer = (
  file: string,
  nodeArgs: ReadonlyArray<string> = [],
  env: Readonly<Record<string, string>> = {}
): Promise<ServerProcess> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", path.join(here, file)], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, ...env }
    })
    child.stdout.on("data", (data: Buffer) => {
      const match = /PORT (\d+)/.exec(data.toString())
      if (match) {
        resolve({ port: Number(match[1]), stop: () => child.kill("SIGINT"), cpuMicros: () => processCpuMicros(child.pid!) })
      }
    })
    child.on("exit", (code) => reject(new Error(`bench server ${file} exited with ${code}`)))
  })

/** Average requests per second of one autocannon run; any non-2xx answer or error fails the run. */
export const load = async (options: autocannon.Options): Promise<number> => (await measure(options)).perSecond

/** One autocannon run: requests per second and the total number of requests answered. */
export const measure = async (options: autocannon.Options): Promise<{ readonly perSecond: number; readonly requests: number }> => {
  const result = await autocannon({ connections: 32, duration: 3, ...options })
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${options.url}: ${result.non2xx} non-2xx, ${result.errors} errors`)
  return { perSecond: result.requests.average, requests: result.requests.total }
}

/**
 * One autocannon run against `server`, with the server process's CPU time per answered request
 * (µs): on a loaded shared machine this distorts far less than requests per second.
 */
export const measureCpu = async (server: ServerProcess, options: autocannon.Options) => {
  const before = server.cpuMicros()
  const result = await measure(options)
  return { ...result, cpuMicrosPerRequest: (server.cpuMicros() - before) / result.requests }
}

/** The median of some numbers. */
export const median = (values: ReadonlyArray<number>): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** The `q` quantile (0..1) of some numbers. */
export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

/** Prints rows as an aligned table under a title. */
export const table = (title: string, rows: ReadonlyArray<Record<string, string | number>>) => {
  console.log(`\n${title}`)
  console.table(rows)
}

/** Formats operations per second. */
export const perSecond = (n: number): string => Math.round(n).toLocaleString("en-US")
