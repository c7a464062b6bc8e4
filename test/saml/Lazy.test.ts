/**
 * The SAML verification libraries are optional and loaded on first use (spec 2.7): in a process
 * where they cannot be resolved, the app still boots and `/saml/metadata` works; the ACS answers
 * 503 instead of crashing, and the log names the packages to install (they are optional peer
 * dependencies: an install without SAML does not pull them).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { libraryPackages } from "../../src/saml/Errors.js"

const run = promisify(execFile)
const fixture = (name: string) => fileURLToPath(new URL(`fixtures/${name}`, import.meta.url))

describe("SAML libraries loaded lazily", () => {
  it("without xmldsigjs and xmldom: metadata 200, ACS 503", async () => {
    const { stdout, stderr } = await run(process.execPath, [
      "--import",
      "tsx",
      "--import",
      fixture("denyXmlLibraries.mjs"),
      fixture("withoutXmlLibraries.ts")
    ])
    assert.deepStrictEqual(JSON.parse(stdout.trim().split("\n").at(-1)!), { metadata: 200, entity: true, acs: 503 })
    // The operator is told which packages to install: at boot, and again when a message needs them.
    const logged = stdout + stderr
    assert.include(logged, "cannot be resolved: xmldsigjs, xml-core, xpath, @xmldom/xmldom")
    assert.include(logged, "loading failed")
    assert.include(logged, "npm install xmldsigjs xml-core xpath @xmldom/xmldom")
  }, 60_000)

  it("they are optional peer dependencies, not dependencies every install pulls", () => {
    const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      readonly dependencies: Record<string, string>
      readonly peerDependencies: Record<string, string>
      readonly peerDependenciesMeta: Record<string, { readonly optional?: boolean }>
    }
    for (const name of libraryPackages) {
      assert.notProperty(manifest.dependencies, name)
      assert.property(manifest.peerDependencies, name)
      assert.isTrue(manifest.peerDependenciesMeta[name]?.optional, name)
    }
  })
})
