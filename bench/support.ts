/**
 * Benchmark helpers: a server in its own process, autocannon runs, and table printing.
 */
import autocannon from "autocannon"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

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
