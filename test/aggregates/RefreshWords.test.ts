/**
 * Refresh policies in words (the dashboard's Aggregates panel): cron expressions described from
 * their parsed fields, however they were written; intervals, hybrid and manual policies.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cron, Either, Schema } from "effect"
import { defineAggregate } from "../../src/aggregates/index.js"
import * as RefreshWords from "../../src/aggregates/RefreshWords.js"

const words = (expression: string) => RefreshWords.cronWords(Either.getOrThrow(Cron.parse(expression, "UTC")))

describe("refresh policies in words", () => {
  it("cron expressions, by what they fire on", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["* * * * *", "every minute"],
      ["0 * * * *", "every hour at :00"],
      ["15,45 * * * *", "every hour at :15 and :45"],
      ["*/15 * * * *", "every 15 minutes"],
      ["0,15,30,45 * * * *", "every 15 minutes"],
      ["0 3 * * *", "every day at 03:00"],
      ["30 9,17 * * *", "every day at 09:30 and 17:30"],
      ["0 */6 * * *", "every 6 hours at :00"],
      ["0 9 * * 1-5", "at 09:00 on Monday to Friday"],
      ["0 9 * * MON-FRI", "at 09:00 on Monday to Friday"],
      ["0 0 * * 0,6", "at 00:00 on Sunday and Saturday"],
      ["0 0 1 * *", "at 00:00 on day 1 of the month"],
      ["0 0 1,15 * *", "at 00:00 on day 1 and 15 of the month"],
      ["0 0 1 1,7 *", "at 00:00 on day 1 of the month in January and July"],
      ["0 12 13 * 5", "at 12:00 on day 13 of the month or on Friday"],
      ["*/10 9-17 * * 1-5", "every 10 minutes of hour 09 to 17 on Monday to Friday"],
      ["*/30 * * * * *", "every 30 seconds"],
      ["5 0 * * * *", "at second 5 of every hour at :00"]
    ]
    for (const [expression, expected] of cases) assert.strictEqual(words(expression), expected, expression)
  })

  it("every policy of an aggregate, with its time zone", () => {
    const output = Schema.Struct({ n: Schema.Number })
    const build = () => [{ n: 1 }]
    const of = (refresh: Parameters<typeof defineAggregate>[0]["refresh"]) =>
      RefreshWords.describe(defineAggregate({ name: "a", output, build, ...(refresh === undefined ? {} : { refresh }) }))
    assert.strictEqual(of({ cron: "0 * * * *", timezone: "America/New_York" }), "every hour at :00, America/New_York")
    assert.strictEqual(of({ cron: "0 3 * * *" }), "every day at 03:00, UTC")
    assert.strictEqual(of("5m"), "every 5 minutes")
    assert.strictEqual(of("1h"), "every hour")
    assert.strictEqual(of({ interval: "1h", onChange: ["orders"], debounceMs: 500 }), "every hour, and 500 ms after a change to orders")
  })
})
