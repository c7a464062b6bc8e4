/**
 * The one line every launcher prints for a boot failure (`fw serve`, `fw dev`, `NodeServer.runMain`):
 * the message's first line, never an empty `fw: `. The spawned programs of `Cli.test.ts` check the
 * lines as printed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Option } from "effect"
import * as Launch from "../../src/app/Launch.js"
import { SettingInvalid } from "../../src/app/Settings.js"
import { TableNotDeclared } from "../../src/kernel/Errors.js"
import { ListenFailed } from "../../src/server/NodeServer.js"

describe("Launch: a boot failure as one line", () => {
  it("a typed failure is its message's first line", () => {
    assert.strictEqual(
      Launch.line(new ListenFailed({ port: 3000, message: "port 3000 is in use (on 127.0.0.1): stop the program listening there, or serve on another port" })),
      "fw: port 3000 is in use (on 127.0.0.1): stop the program listening there, or serve on another port"
    )
    assert.strictEqual(
      Launch.line(new TableNotDeclared({ table: "tags", usedBy: `plugin "search"` })),
      `fw: plugin "search" uses table "tags", which the app does not declare: add it to the tables of defineApp({ tables: [...] })`
    )
    assert.strictEqual(Launch.line(new Error("first\n    at stack")), "fw: first")
  })

  it("an error without a message is named by its tag or name and its cause, never an empty line", () => {
    assert.strictEqual(Launch.line({ _tag: "ServeError", cause: new Error("listen EADDRINUSE: address already in use") }), "fw: ServeError: listen EADDRINUSE: address already in use")
    assert.strictEqual(Launch.line(new Error("")), "fw: Error")
    assert.strictEqual(Launch.line({}), "fw: failed")
    assert.strictEqual(Launch.line(undefined), "fw: undefined")
    assert.strictEqual(Launch.line(""), "fw: failed")
  })

  it("typed failures and refused settings (even thrown) are reportable in one line; other defects are not", () => {
    const setting = new SettingInvalid({ setting: "PORT", expected: "a port" })
    assert.isTrue(Option.isSome(Launch.reportable(Cause.fail(new TableNotDeclared({ table: "tags" })))))
    assert.isTrue(Option.isSome(Launch.reportable(Cause.die(setting))))
    assert.isTrue(Option.isNone(Launch.reportable(Cause.die(new TypeError("x is undefined")))))
  })
})
