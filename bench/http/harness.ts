/**
 * REST benchmark helpers: a server in its own process (so client and server do not share a
 * core's event loop), autocannon runs, medians and table printing.
 */
import autocannon from "autocannon"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))

/** A running server process. */
export interface ServerProcess {
  readonly port: number
  readonly stop: () => void
}

/** Starts `bench/http/<file>` with tsx in a child process; resolves with the port it prints. */
export const startServer = (file: string): Promise<ServerProcess> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(here, file)], { stdio: ["ignore", "pipe", "inherit"] })
    child.stdout.on("data", (data: Buffer) => {
      const match = /PORT (\d+)/.exec(data.toString())
      if (match) resolve({ port: Number(match[1]), stop: () => child.kill() })
    })
    child.on("exit", (code) => reject(new Error(`bench server ${file} exited with ${code}`)))
  })

/** Average requests per second of one autocannon run; any non-2xx answer or error fails the run. */
export const load = async (options: autocannon.Options): Promise<number> => {
  const result = await autocannon({ connections: 32, duration: 3, ...options })
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${options.url}: ${result.non2xx} non-2xx, ${result.errors} errors`)
  return result.requests.average
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
