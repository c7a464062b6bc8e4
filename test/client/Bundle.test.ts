import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { bundle } from "./bundle.js"

const serverSide = /^src\/server\/|^src\/(auth|http|history|saml|inspect)\/|node_modules\/(@effect\/sql|@effect\/platform-node|better-sqlite3|pg|pg-[a-z]+|ws\/lib)\//

describe("the browser bundle of @fw/framework/client", () => {
  it.live("builds for the browser with no node: import and no server code", () => Effect.promise(async () => {
    for (const entry of ["src/client/index.ts", "test/client/page/mountOnly.ts", "test/client/page/hooks.ts"]) {
      const built = await bundle(entry)
      assert.deepStrictEqual(built.output.imports, [], `${entry}: the bundle imports nothing external`)
      assert.notMatch(built.code, /(from|import|require)\s*\(?\s*["']node:/, `${entry}: no node: import`)
      const leaked = built.inputs.filter((input) => serverSide.test(input) || input.startsWith("node:"))
      assert.deepStrictEqual(leaked, [], `${entry}: no server code, SQL driver or Node platform`)
      console.log(`[fw bundle] ${entry}: ${(built.bytes / 1024).toFixed(1)} KiB minified, ${(built.gzip / 1024).toFixed(1)} KiB gzip`)
    }
  }))
})
