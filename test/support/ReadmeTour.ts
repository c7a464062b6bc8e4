/**
 * The README's tour as a user runs it: its `main.ts` block extracted (port and database file moved
 * into a temporary folder under test/), started with tsx with `@fw/framework` resolved to the
 * sources, as the snippet tests do.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type AddressInfo } from "node:net"
import * as path from "node:path"

const root = path.resolve(import.meta.dirname, "../..")

/** The first fenced block of `language` after the heading `heading` whose text matches `contains`. */
export const block = (readme: string, heading: string, language: string, contains: RegExp): string => {
  const after = readme.slice(readme.indexOf(heading))
  const fence = new RegExp("^```" + language + "\\n([\\s\\S]*?)^```$", "gm")
  for (const match of after.matchAll(fence)) if (contains.test(match[1]!)) return match[1]!
  throw new Error(`no ${language} block under ${heading}`)
}

/** A port nothing listens on. */
export const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })

/** A running tour: its base URL, its folder, and how to stop it (its folder is removed). */
export interface Running {
  readonly url: string
  readonly dir: string
  readonly stop: () => void
}

/** Starts the README tour's `main.ts` on a free port with `env` added to this process's. */
export const start = async (env: Record<string, string> = {}): Promise<Running> => {
  const readme = readFileSync(path.join(root, "README.md"), "utf8")
  const tour = block(readme, "## A tour", "ts", /defineApp/)
  const dir = mkdtempSync(path.join(root, "test/docs/tour-"))
  const port = await freePort()
  const exports = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).exports as Record<string, Record<string, string>>
  const paths = Object.fromEntries(Object.entries(exports).flatMap(([subpath, target]) =>
    typeof target["@fw/source"] === "string" ? [[`@fw/framework${subpath.slice(1)}`, [path.join(root, target["@fw/source"])]]] : []))
  writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ extends: path.join(root, "tsconfig.base.json"), compilerOptions: { baseUrl: ".", paths } }))
  if (!tour.includes("port: 3000") || !tour.includes(`filename: "app.db"`)) throw new Error("the tour no longer listens on port 3000 with app.db")
  writeFileSync(path.join(dir, "main.ts"), tour.replace("port: 3000", `port: ${port}`).replace(`filename: "app.db"`, `filename: ${JSON.stringify(path.join(dir, "app.db"))}`))
  const server = spawn(process.execPath, [path.join(root, "node_modules/tsx/dist/cli.mjs"), "--tsconfig", path.join(dir, "tsconfig.json"), path.join(dir, "main.ts")], {
    cwd: dir,
    env: { ...process.env, SESSION_SECRET: "tour-session-secret-of-at-least-32-bytes", ...env }
  })
  const stop = () => {
    server.kill("SIGTERM")
    rmSync(dir, { recursive: true, force: true })
  }
  let output = ""
  server.stdout.on("data", (chunk: Buffer) => output += chunk.toString())
  server.stderr.on("data", (chunk: Buffer) => output += chunk.toString())
  try {
    await new Promise<void>((resolve, reject) => {
      server.on("exit", () => reject(new Error(`main.ts exited: ${output}`)))
      const check = () => {
        if (output.includes("fw: serving")) resolve()
        else if (server.exitCode === null) setTimeout(check, 100)
      }
      check()
    })
  } catch (error) {
    stop()
    throw error
  }
  return { url: `http://127.0.0.1:${port}`, dir, stop }
}
