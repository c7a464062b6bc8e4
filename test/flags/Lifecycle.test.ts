/**
 * Usage tracking and the lifecycle report (spec 2.11) on the TestClock over SQLite: constant,
 * expired, stale, never-observed and untracked flags; only server-side reads count; flushes on
 * the interval, retention sweep, `FW_FLAG_USAGE_TTL_HOURS`.
 */
import { FetchHttpClient } from "@effect/platform"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import * as PluginHost from "../../src/server/PluginHost.js"
import { FlagRegistry, FlagUsage, flagsPlugin, isFlagEnabled, layerMemory, layerSql } from "../../src/flags/index.js"
import * as FlagRegistryModule from "../../src/flags/FlagRegistry.js"
import * as tables from "../../src/flags/tables.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Pg from "../support/Pg.js"

const day = 86_400_000
const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme" })

type StoreLayer = Layer.Layer<Store.Store | ChangeTap.ChangeTap>

/** The store tiers the SQL registry is proven on: the memory tier, SQLite and PostgreSQL. */
const tiers: ReadonlyArray<readonly [string, () => StoreLayer]> = [
  ["memory store", () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))],
  ["SQLite", () =>
    Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables.all)).pipe(Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })))),
      Layer.orDie
    )],
  ...(Pg.serverUrl === null ? [] : [["PostgreSQL", () =>
    Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables.all)).pipe(Layer.provideMerge(Pg.layerFreshClient))),
      Layer.orDie
    )] as const])
]
if (Pg.serverUrl === null) console.warn(Pg.skipReason)

const flags = {
  always: true,
  killed: { enabled: false },
  zero: { rollout: 0 },
  ended: { schedule: { deactivateAt: 1_000 } },
  later: { schedule: { activateAt: 1_000 * day } },
  old: { rollout: 50 },
  fresh: { targeting: [{ tenantIds: ["acme"] }] },
  unseen: { rollout: 50 }
} as const


const reportOf = (key: string) =>
  Effect.map(Effect.flatMap(FlagRegistry, (registry) => registry.list), (list) => list.find((entry) => entry.key === key)!.lifecycle)

for (const [tier, storeLayer] of tiers) {
describe(`lifecycle report (store: 'sql' on the ${tier})`, () => {
  const sqlStore = storeLayer()
  const registrySql = layerSql({ flags }).pipe(Layer.provideMerge(sqlStore))

  it.scoped("constant, expired, not yet active, stale, evaluated and never observed flags (SQL tier)", () =>
    Effect.gen(function*() {
      const registry = yield* FlagRegistry
      yield* TestClock.setTime(5_000)
      yield* isFlagEnabled({ subject: alice }, "old")
      yield* registry.flushUsage
      yield* TestClock.adjust(`${31} days`)
      yield* isFlagEnabled({ subject: alice }, "fresh")
      yield* isFlagEnabled({ subject: alice }, "fresh")
      // A bulk delivery (flags.evaluate) is not use.
      yield* registry.snapshot(alice)
      const reports = Object.fromEntries(
        (yield* registry.list).map((entry) => [entry.key, [entry.lifecycle.shape, entry.lifecycle.usage, entry.lifecycle.removalCandidate]])
      )
      assert.deepStrictEqual(reports, {
        always: ["constantOn", "neverObserved", true],
        killed: ["constantOff", "neverObserved", true],
        zero: ["constantOff", "neverObserved", true],
        ended: ["expired", "neverObserved", true],
        later: ["notYetActive", "neverObserved", false],
        old: ["conditional", "stale", true],
        fresh: ["conditional", "evaluated", false],
        unseen: ["conditional", "neverObserved", false]
      })
      assert.strictEqual((yield* reportOf("old")).lastEvaluatedAt, 5_000)
      // The buffered reads of "fresh" are written at the next flush: one row per (flag, UTC day, source).
      yield* registry.flushUsage
      const store = yield* Store.Store
      const rows = yield* store.find(FlagUsage, { orderBy: "flag" })
      assert.deepStrictEqual(rows.map((r) => [r.flag, r.day, r.source, r.count]), [
        ["fresh", "1970-02-01", "isFlagEnabled", 2],
        ["old", "1970-01-01", "isFlagEnabled", 1]
      ])
    }).pipe(Effect.provide(registrySql)))

  it.scoped("retention: rows past retentionDays are swept, and a flag with no read left in the window is never observed", () =>
    Effect.gen(function*() {
      const registry = yield* FlagRegistry
      yield* TestClock.setTime(0)
      yield* isFlagEnabled({ subject: alice }, "old")
      yield* isFlagEnabled({ subject: alice }, "old")
      yield* TestClock.adjust("1 day")
      yield* isFlagEnabled({ subject: alice }, "old")
      yield* registry.flushUsage
      const store = yield* Store.Store
      assert.deepStrictEqual((yield* store.find(FlagUsage, { orderBy: "day" })).map((r) => [r.day, r.count]), [["1970-01-01", 2], ["1970-01-02", 1]])
      // A day's row goes once its whole day is older than the retention.
      yield* TestClock.setTime(91 * day - 1)
      assert.strictEqual(yield* registry.sweepUsage, 0)
      yield* TestClock.setTime(91 * day)
      assert.strictEqual(yield* registry.sweepUsage, 1)
      assert.strictEqual((yield* reportOf("old")).usage, "stale")
      yield* TestClock.setTime(92 * day)
      assert.strictEqual(yield* registry.sweepUsage, 1)
      assert.strictEqual((yield* reportOf("old")).usage, "neverObserved")
    }).pipe(Effect.provide(registrySql)))

  it.scoped("the plugin flushes every flushIntervalMs and at shutdown", () =>
    Effect.gen(function*() {
      const plugin = flagsPlugin({ flags, store: "sql", usage: { flushIntervalMs: 60_000 } })
      const store = yield* Store.Store
      yield* Effect.scoped(Effect.gen(function*() {
        yield* PluginHost.start(plugin)
        yield* plugin.registry.isEnabled(alice, "old", "gatedBy")
        assert.strictEqual(yield* store.count(FlagUsage), 0)
        yield* TestClock.adjust("60 seconds")
        // The flush forked by the clock tick may still be writing (PostgreSQL answers asynchronously): each count waits on the database.
        yield* store.count(FlagUsage).pipe(Effect.repeat({ until: (n) => n > 0, times: 500 }))
        assert.deepStrictEqual((yield* store.find(FlagUsage)).map((r) => [r.flag, r.source, r.count]), [["old", "gatedBy", 1]])
        yield* plugin.registry.isEnabled(alice, "old", "gatedBy")
      }))
      assert.deepStrictEqual((yield* store.find(FlagUsage)).map((r) => r.count), [2])
    }).pipe(Effect.provide(sqlStore), Effect.provide(FetchHttpClient.layer)))

})
}

describe("lifecycle report (store: 'memory')", () => {
  it.effect("a memory registry records nothing: every flag is untracked", () =>
    Effect.gen(function*() {
      yield* isFlagEnabled({ subject: alice }, "old")
      const [old, always] = yield* Effect.all([reportOf("old"), reportOf("always")])
      assert.deepStrictEqual(old, { shape: "conditional", usage: "untracked", lastEvaluatedAt: null, removalCandidate: false })
      assert.deepStrictEqual(always.removalCandidate, true)
    }).pipe(Effect.provide(layerMemory({ flags }))))
})

describe("usage options", () => {
  const options = FlagRegistryModule.usageOptions
  it("defaults: tracking on with the SQL store, 5 min flush, stale after 30 days, retention 90 days", () => {
    assert.deepStrictEqual(options({ store: "sql" }, {}), { track: true, flushIntervalMs: 300_000, staleAfterDays: 30, retentionDays: 90 })
    assert.deepStrictEqual(options({}, {}).track, false)
  })
  it("FW_FLAG_USAGE_TTL_HOURS sets the retention when the option is absent", () => {
    assert.strictEqual(options({ store: "sql", usage: { staleAfterDays: 1 } }, { FW_FLAG_USAGE_TTL_HOURS: "48" }).retentionDays, 2)
    assert.strictEqual(options({ store: "sql", usage: { retentionDays: 10, staleAfterDays: 5 } }, { FW_FLAG_USAGE_TTL_HOURS: "48" }).retentionDays, 10)
    assert.throws(() => options({ store: "sql" }, { FW_FLAG_USAGE_TTL_HOURS: "soon" }), /FW_FLAG_USAGE_TTL_HOURS/)
    assert.throws(() => options({ store: "sql" }, { FW_FLAG_USAGE_TTL_HOURS: "48" }), /staleAfterDays \(30\) is greater than retentionDays \(2\)/)
  })
})
