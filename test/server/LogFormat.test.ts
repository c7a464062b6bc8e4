/** `FW_LOG_FORMAT=json`: the CLI's log lines are JSON objects, one a line. */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { createServer } from "node:net"
import * as path from "node:path"

const bin = path.resolve("bin/fw.js")
const entry = path.resolve("test/fixtures/entry.ts")

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")))
    })
  })

/** Runs `fw dev` on the fixture (SQLite in memory) until it logs its schema step, then stops it. */
const firstLogLine = async (format: string | undefined) => {
  const port = await freePort()
  const env: Record<string, string | undefined> = { ...process.env, PORT: String(port), FW_LOG_FORMAT: format }
  if (format === undefined) delete env["FW_LOG_FORMAT"]
  return new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, [bin, "dev", entry], {
      env,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const onData = (chunk: Buffer) => {
      output += String(chunk)
      const line = output.split("\n").find((l) => l.includes("schema: create table notes"))
      if (line !== undefined) {
        child.kill()
        resolve(line)
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.once("exit", (code) => reject(new Error(`fw dev exited (${code}) before logging:\n${output}`)))
  })
}

describe("FW_LOG_FORMAT", () => {
  it("json: a log line is one JSON object with the level and the message", async () => {
    const line = await firstLogLine("json")
    const parsed = JSON.parse(line) as { logLevel: string; message: string }
    assert.strictEqual(parsed.logLevel, "INFO")
    assert.include(parsed.message, "schema: create table notes")
  }, 60_000)

  it("unset: the pretty line of a terminal", async () => {
    const line = await firstLogLine(undefined)
    assert.match(line, /^\[[\d:.]+\] INFO \(#\d+\): schema: create table notes/)
  }, 60_000)
})
