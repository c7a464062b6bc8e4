/**
 * Bench servers run as they ship, not under tsx: each server file is bundled with esbuild (fw's
 * sources inlined, packages left external) and run by plain `node`.
 *
 * Why: tsx transforms with esbuild's `keepNames`, which wraps every named function it creates in
 * `__name(fn, "...")`, an `Object.defineProperty` call, each time the function is made. fw's
 * request path makes named closures per request (a `const f = () => ...` inside a handler), so
 * under tsx every request pays several `defineProperty` calls that the built package (`tsc`
 * output, no `__name`) never makes: about 5 % of the server's on-CPU samples under `perf`, and
 * 10-15 % of its CPU per `POST /rpc` call in interleaved runs. Fastify's own code, in
 * `node_modules`, is never transformed by tsx, so the tsx-run comparison was tilted against fw.
 * `FW_BENCH_TSX=1` runs the servers under tsx as before.
 */
import { execFileSync, spawn } from "node:child_process"
import { rmSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { processCpuMicros, type ServerProcess, startServer } from "./http/harness.js"

const here = path.dirname(fileURLToPath(import.meta.url))

/** Bundles `entry` (a path from the repository's root) next to it, so its imports resolve from the repository's node_modules. */
export const bundle = (entry: string, label: string): string => {
  const root = path.join(here, "..")
  const outfile = path.join(root, path.dirname(entry), `.${label}.bundle.mjs`)
  execFileSync(path.join(root, "node_modules", ".bin", "esbuild"), [
    path.join(root, entry),
    "--bundle",
    "--platform=node",
    "--format=esm",
    "--packages=external",
    `--outfile=${outfile}`,
    "--log-level=warning"
  ], { cwd: root })
  return outfile
}

/**
 * Starts the bench server `entry` (a path from the repository's root, say `bench/rpcServer.ts`)
 * bundled, in its own process (`FW_BENCH_TSX=1`: under tsx, `startServer`); resolves with the port it prints.
 */
export const startBundled = (entry: string, label: string): Promise<ServerProcess> => {
  if (process.env.FW_BENCH_TSX === "1") return startServer(path.relative(path.join(here, "http"), path.join(here, "..", entry)))
  const file = bundle(entry, label)
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { stdio: ["ignore", "pipe", "inherit"] })
    // The bundle has been loaded once the server prints its port: removed then (or when it fails).
    child.stdout.on("data", (data: Buffer) => {
      const match = /PORT (\d+)/.exec(data.toString())
      if (match) {
        rmSync(file, { force: true })
        resolve({ port: Number(match[1]), stop: () => child.kill("SIGINT"), cpuMicros: () => processCpuMicros(child.pid!) })
      }
    })
    child.on("exit", (code) => {
      rmSync(file, { force: true })
      reject(new Error(`bench server ${entry} exited with ${code}`))
    })
  })
}
