/**
 * Log injection (issue 38, item 3): a signed-in caller's `engineParams` key carrying a line break,
 * an ANSI escape and other controls must not start a second log line or reach the terminal raw,
 * with effect's default logger (its `stringLogger` format), `Logger.logFmt` or `Logger.json`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as Subject from "../../src/kernel/Subject.js"
import * as EngineSupport from "../../src/search/EngineSupport.js"
import { plugin, search, stack } from "./support.js"

const alice = Subject.make({ type: "user", id: "alice", tenantId: "t1" })

/** A key that would forge an error line, colour the terminal, and break lines in other ways too. */
const forged = "k\n[00:00:00.000] ERROR (#1): FORGED line\r\u001b[31mred\u001b[0m\u0085\u2028end"

// eslint-disable-next-line no-control-regex
const control = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/

const formats = [
  { name: "the default logger", logger: Logger.stringLogger, message: (line: string) => line },
  { name: "Logger.logFmt", logger: Logger.logfmtLogger, message: (line: string) => line },
  { name: "Logger.json", logger: Logger.jsonLogger, message: (line: string) => String((JSON.parse(line) as { message: unknown }).message) }
] as const

/** Runs `effect` with the default logger replaced by `format`, writing into `lines`. */
const capturing = <A, E, R>(effect: Effect.Effect<A, E, R>, format: Logger.Logger<unknown, string>, lines: Array<string>) =>
  effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, Logger.map(format, (line) => void lines.push(line)))))

describe("request-controlled values in log lines", () => {
  for (const format of formats) {
    it.scoped(`search.query: a forged engineParams key stays on one quoted line (${format.name})`, () => {
      const p = plugin("memory")
      return Effect.gen(function*() {
        const lines: Array<string> = []
        yield* capturing(search(p, alice, { index: "notes", q: "x", engineParams: { [forged]: 1 } }), format.logger, lines)
        assert.strictEqual(lines.length, 1)
        const line = lines[0]!
        assert.notMatch(line, control, "no raw control character in the line")
        const message = format.message(line)
        // Rendered for an operator, the message itself holds no line break or escape either.
        assert.notMatch(message, control)
        assert.include(message, "dropped engineParams not allowed: ")
        assert.include(message, "ERROR (#1): FORGED line")
        if (format.name === "Logger.json") {
          assert.include(message, "dropped engineParams not allowed: \"k\\n[00:00:00.000] ERROR (#1): FORGED line\\r\\u001b[31m")
        }
      }).pipe(Effect.provide(stack(null, p)))
    })

    it.effect(`an engine backend's dropped engineParams are quoted too (${format.name})`, () =>
      Effect.gen(function*() {
        const lines: Array<string> = []
        const kept = yield* capturing(EngineSupport.presentationParams("engineA", { [forged]: 1, ok: 2 }, new Set(["ok"])), format.logger, lines)
        assert.deepStrictEqual(kept, { ok: 2 })
        assert.strictEqual(lines.length, 1)
        assert.notMatch(lines[0]!, control)
        assert.notMatch(format.message(lines[0]!), control)
      }))
  }
})
