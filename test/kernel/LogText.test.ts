import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as Errors from "../../src/app/Errors.js"
import { StoreUnavailable } from "../../src/kernel/Errors.js"
import * as LogText from "../../src/kernel/LogText.js"

// eslint-disable-next-line no-control-regex
const control = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

describe("LogText.quote: a value from outside as one printable log token", () => {
  it("escapes line breaks, terminal escapes, C1 controls, separators and bidirectional controls", () => {
    const value = "a\nb\r\u001b[2J\u0007\u007f\u0085\u009b31m\u2028\u2029\u202e\u2066z"
    const quoted = LogText.quote(value)
    assert.notMatch(quoted, control)
    assert.strictEqual(quoted, "\"a\\nb\\r\\u001b[2J\\u0007\\u007f\\u0085\\u009b31m\\u2028\\u2029\\u202e\\u2066z\"")
    // It is still JSON: the value reads back exactly.
    assert.strictEqual(JSON.parse(quoted), value)
  })

  it("quotes other values as their JSON, and what has none as its text", () => {
    assert.strictEqual(LogText.quote(12), "12")
    assert.strictEqual(LogText.quote({ k: "x\ny" }), "{\"k\":\"x\\ny\"}")
    assert.strictEqual(LogText.quote(undefined), "\"undefined\"")
    assert.strictEqual(LogText.quote(10n), "\"10\"")
    assert.strictEqual(LogText.quoteAll(["a", "b\n"]), "\"a\", \"b\\n\"")
  })

  it.effect("a database message echoing a caller's value is logged on one line (default logger and Logger.json)", () =>
    Effect.gen(function*() {
      for (const format of [Logger.stringLogger, Logger.jsonLogger]) {
        const lines: Array<string> = []
        yield* Errors.forClient(new StoreUnavailable({ message: "invalid input: \"x\n[00:00:00.000] ERROR (#1): FORGED\u001b[0m\"" }), "t-1").pipe(
          Effect.provide(Logger.replace(Logger.defaultLogger, Logger.map(format, (line) => void lines.push(line))))
        )
        assert.strictEqual(lines.length, 1)
        assert.notMatch(lines[0]!, control)
        if (format === Logger.jsonLogger) assert.notMatch(String((JSON.parse(lines[0]!) as { message: unknown }).message), control)
      }
    }))
})
