/**
 * `fw serve` is how an app runs in production: with `NODE_ENV` unset it keeps the procedures'
 * OpenAPI document private (the app did not opt in), while `NODE_ENV=development` serves it.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { freePort } from "../support/ReadmeTour.js"

const bin = path.resolve("bin/fw.js")
const entry = path.resolve("test/fixtures/entry.ts")

/** `fw serve` on a free port with `NODE_ENV` as given (undefined: unset); the status of `paths`. */
const statusesUnderServe = async (nodeEnv: string | undefined, paths: ReadonlyArray<string>) => {
  const port = await freePort()
  const dir = mkdtempSync(path.join(tmpdir(), "fw-cli-openapi-"))
  const { NODE_ENV: _unset, ...env } = process.env
  const child = spawn(process.execPath, [bin, "serve", entry], {
    env: { ...env, ...(nodeEnv === undefined ? {} : { NODE_ENV: nodeEnv }), PORT: String(port), FW_TEST_DB: path.join(dir, "app.db") }
  })
  let output = ""
  child.stdout.on("data", (chunk: Buffer) => output += chunk.toString())
  child.stderr.on("data", (chunk: Buffer) => output += chunk.toString())
  try {
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (output.includes("fw: serving")) resolve()
        else if (child.exitCode !== null) reject(new Error(`fw serve exited: ${output}`))
        else setTimeout(check, 100)
      }
      check()
    })
    return await Promise.all(paths.map((p) => fetch(`http://127.0.0.1:${port}${p}`).then((response) => response.status)))
  } finally {
    child.kill("SIGTERM")
    rmSync(dir, { recursive: true, force: true })
  }
}

describe("fw serve and the procedures' OpenAPI document", () => {
  it("NODE_ENV unset: served as production, /rpc/openapi.json is not published; NODE_ENV=development publishes it", async () => {
    assert.deepStrictEqual(await statusesUnderServe(undefined, ["/openapi.json", "/rpc/openapi.json"]), [200, 404])
    assert.deepStrictEqual(await statusesUnderServe("development", ["/rpc/openapi.json"]), [200])
  }, 120_000)
})
