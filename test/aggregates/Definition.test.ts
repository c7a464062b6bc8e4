/**
 * `defineAggregate` (spec 2.13): defaults and the refusals of 7.1 (5, 6, 9); cron time zones and the
 * DST behaviour of the schedule (documented in docs/aggregates.md); discovery of `*.aggregate.ts`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cron, Effect, Queue, Schema, TestClock } from "effect"
import * as path from "node:path"
import { AggregateDefinitionError, defineAggregate, discoverAggregates } from "../../src/aggregates/index.js"
import { base, Orders, scheduler } from "./support.js"

const Out = Schema.Struct({ n: Schema.Number })
const build = () => [{ n: 1 }]

const refuses = (f: () => unknown, text: string) => {
  try {
    f()
  } catch (error) {
    assert.instanceOf(error, AggregateDefinitionError)
    assert.include((error as Error).message, text)
    return
  }
  assert.fail(`expected a refusal mentioning "${text}"`)
}

describe("defineAggregate", () => {
  it("defaults: bootRefresh persistent, strategy replace, no indexes; cron time zone UTC", () => {
    const a = defineAggregate({ name: "a", refresh: "5m", output: Out, build })
    assert.strictEqual(a.bootRefresh, "persistent")
    assert.strictEqual(a.strategy, "replace")
    assert.deepStrictEqual(a.indexes, [])
    assert.deepStrictEqual(a.policy, { _tag: "interval", ms: 300_000 })
    const c = defineAggregate({ name: "c", refresh: { cron: "0 3 * * *" }, output: Out, build })
    assert.strictEqual(c.policy._tag === "cron" && c.policy.timezone, "UTC")
    // Never the process zone: 03:00 UTC whatever TZ says.
    assert.strictEqual(c.policy._tag === "cron" && Cron.next(c.policy.cron, new Date("2025-01-01T00:00:00Z")).toISOString(), "2025-01-01T03:00:00.000Z")
    const h = defineAggregate({ name: "h", refresh: { interval: "1 hour", onChange: [Orders] }, output: Out, build })
    assert.deepStrictEqual(h.policy, { _tag: "hybrid", ms: 3_600_000, onChange: ["orders"], debounceMs: 1_000 })
    for (const [text, ms] of [["500ms", 500], ["30s", 30_000], ["1.5h", 5_400_000], ["2 days", 172_800_000]] as const) {
      assert.deepStrictEqual(defineAggregate({ name: "i", refresh: text, output: Out, build }).policy, { _tag: "interval", ms })
    }
  })

  it("refusal 5: merge without mergeKey", () => {
    refuses(() => defineAggregate({ name: "m", refresh: "1m", output: Out, build, strategy: "merge" }), `strategy "merge" needs a mergeKey`)
  })

  it("refusal 9: invalid interval or cron strings, and unknown time zones, fail at definition (boot)", () => {
    for (const bad of ["", "soon", "0s", "-5m", "5 parsecs", "Infinity"]) {
      refuses(() => defineAggregate({ name: "i", refresh: bad, output: Out, build }), "invalid refresh interval")
    }
    refuses(() => defineAggregate({ name: "c", refresh: { cron: "61 * * * *" }, output: Out, build }), "invalid cron")
    refuses(() => defineAggregate({ name: "c", refresh: { cron: "@daily" }, output: Out, build }), "invalid cron")
    refuses(() => defineAggregate({ name: "c", refresh: { cron: "0 3 * * *", timezone: "Mars/Olympus" }, output: Out, build }), "time zone")
    refuses(() => defineAggregate({ name: "h", refresh: { interval: "nope", onChange: ["orders"] }, output: Out, build }), "invalid refresh interval")
  })

  it("refusal 6: an incremental shape that is not maintainable", () => {
    const toRow = () => ({ n: 1 })
    const shape = (extra: Record<string, unknown>) => () =>
      defineAggregate({ name: "x", output: Out, incremental: { source: "orders", op: "sum", column: "x", toRow, ...extra } as never })
    refuses(shape({ op: ["sum", "count"] }), "more than one op")
    refuses(shape({ op: "median" }), "exactly one of")
    refuses(shape({ join: { table: "users" } }), `"join"`)
    refuses(shape({ window: "rank" }), `"window"`)
    refuses(shape({ distinct: true }), `"distinct"`)
    refuses(shape({ having: { n: 1 } }), `"having"`)
    refuses(shape({ column: undefined }), `op "sum" needs a column`)
    refuses(shape({ source: Orders, groupBy: ["nope"] }), `"nope" is not a column`)
    refuses(() => defineAggregate({ name: "x", output: Out, build, incremental: { source: "orders", op: "count", toRow } }), "has no build")
  })

  it.scoped("an incremental source that is not an app table fails boot", () =>
    Effect.gen(function*() {
      const ctx = yield* base({ name: "memory", client: () => null })
      const agg = defineAggregate({ name: "x", output: Out, incremental: { source: "nope", op: "count", toRow: () => ({ n: 1 }) } })
      const defect = yield* Effect.exit(scheduler("memory", ctx, [agg]))
      assert.include(String(defect._tag === "Failure" ? defect.cause : ""), `aggregate "x" uses table "nope", which the app does not declare`)
    }))
})

/** The instants (ISO) a cron aggregate refreshes at, driven by the TestClock from `from`. */
const firings = (expression: string, timezone: string, from: string, count: number) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(new Date(from).getTime())
    const ctx = yield* base({ name: "memory", client: () => null })
    const agg = defineAggregate({ name: "cron", refresh: { cron: expression, timezone }, output: Out, build })
    const s = yield* scheduler("memory", ctx, [agg])
    const outcomes = yield* s.outcomes
    yield* s.booted
    const out: Array<string> = []
    for (let i = 0; i < count; i++) {
      const next = (yield* s.meta("cron")).nextRefreshAt!
      yield* TestClock.setTime(next.getTime())
      const fired = yield* Queue.take(outcomes).pipe(Effect.repeat({ until: (o) => o.trigger === "schedule" }))
      assert.strictEqual(fired.outcome, "refreshed")
      out.push(new Date(fired.at).toISOString())
    }
    return out
  })

describe("cron refresh across America/New_York DST changes (TestClock)", () => {
  it.scoped("2025-03-09 spring forward: a daily 02:30 runs at 03:30 EDT on the short day", () =>
    Effect.map(firings("30 2 * * *", "America/New_York", "2025-03-08T12:00:00Z", 3), (at) =>
      assert.deepStrictEqual(at, ["2025-03-09T07:30:00.000Z", "2025-03-10T06:30:00.000Z", "2025-03-11T06:30:00.000Z"])))

  it.scoped("2025-03-09 spring forward: hourly runs skip the missing 02:00 hour", () =>
    Effect.map(firings("0 * * * *", "America/New_York", "2025-03-09T05:30:00Z", 3), (at) =>
      assert.deepStrictEqual(at, ["2025-03-09T06:00:00.000Z", "2025-03-09T07:00:00.000Z", "2025-03-09T08:00:00.000Z"])))

  it.scoped("2025-11-02 fall back: a daily 01:30 runs once (first pass)", () =>
    Effect.map(firings("30 1 * * *", "America/New_York", "2025-11-01T12:00:00Z", 2), (at) =>
      assert.deepStrictEqual(at, ["2025-11-02T05:30:00.000Z", "2025-11-03T06:30:00.000Z"])))

  it.scoped("2025-11-02 fall back: hourly runs once per wall-clock hour; the repeated 01:00 EST is not run again", () =>
    Effect.map(firings("0 * * * *", "America/New_York", "2025-11-02T04:30:00Z", 3), (at) =>
      assert.deepStrictEqual(at, ["2025-11-02T05:00:00.000Z", "2025-11-02T07:00:00.000Z", "2025-11-02T08:00:00.000Z"])))
})

describe("discovery", () => {
  it.effect("finds *.aggregate.ts default exports under the entry's folder (nested folders included, other files ignored)", () =>
    Effect.map(discoverAggregates(path.join(import.meta.dirname, "fixtures/discover")), (found) =>
      assert.deepStrictEqual(found.map((a) => a.name), ["daily", "weekly"])))

  it.effect("a default export that is not a defineAggregate result is refused, naming the file", () =>
    Effect.map(Effect.flip(discoverAggregates(path.join(import.meta.dirname, "fixtures/bad"))), (error) => {
      assert.strictEqual(error._tag, "DiscoveryFailed")
      assert.include(error.message, "wrong.aggregate.ts: the default export must be the return value of defineAggregate")
    }))
})
