/**
 * The SAML verification libraries are optional and loaded on first use (spec 2.7): in a process
 * where they cannot be resolved, the app still boots and `/saml/metadata` works; the ACS answers
 * 503 instead of crashing.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"

const run = promisify(execFile)
const fixture = (name: string) => fileURLToPath(new URL(`fixtures/${name}`, import.meta.url))

describe("SAML libraries loaded lazily", () => {
  it("without xmldsigjs and xmldom: metadata 200, ACS 503", async () => {
    const { stdout } = await run(process.execPath, [
      "--import",
      "tsx",
      "--import",
      fixture("denyXmlLibraries.mjs"),
      fixture("withoutXmlLibraries.ts")
    ])
    assert.deepStrictEqual(JSON.parse(stdout.trim().split("\n").at(-1)!), { metadata: 200, entity: true, acs: 503 })
  }, 60_000)
})
