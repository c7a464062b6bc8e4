/**
 * The spec's handler reads for every flag (spec 4.2): `flagVariant(ctx, key)` and
 * `flagValue(ctx, key)` read an untyped flag's live state — its override applied — at the time of
 * the fiber's `Clock` (a schedule boundary crossed on the `TestClock`), beside `isFlagEnabled`;
 * both count as server-side reads (spec 2.11); and `evaluateVariant` is a pure function of its arguments: the definition it is given at the
 * `now` it is given, no override, no clock.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema, TestClock } from "effect"
import {
  defineFlag,
  evaluateVariant,
  FlagDefinitionError,
  FlagRegistry,
  flagValue,
  flagVariant,
  FlagUsage,
  isFlagEnabled,
  layerMemory,
  layerSql
} from "../../src/flags/index.js"
import type { Flag } from "../../src/flags/index.js"
import * as tables from "../../src/flags/tables.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"

const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme" })
const ctx = { subject: alice }
const ops = { type: "user", id: "ops" } as const

const checkout: Flag = {
  variants: [{ name: "one-page", value: { steps: 1 } }, { name: "classic", value: { steps: 3 }, weight: 0 }],
  offVariant: "classic",
  schedule: { activateAt: 10_000 }
}
const Theme = defineFlag({
  key: "theme",
  value: Schema.Struct({ accent: Schema.String }),
  default: { accent: "grey" },
  variants: [{ name: "blue", value: { accent: "blue" } }]
})
const registry = layerMemory({
  flags: { checkout, beta: false, layout: { variants: [{ name: "a", value: "A" }, { name: "b", value: null, weight: 0 }] } },
  typedFlags: [Theme]
})

/** What the three reads say of `key` for alice now. */
const reads = (key: string) =>
  Effect.all({ enabled: isFlagEnabled(ctx, key), variant: flagVariant(ctx, key), value: flagValue(ctx, key) })

describe("flag reads by key in handlers", () => {
  it.effect("an untyped flag's variant and value follow the fiber's clock across a schedule boundary", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(9_999)
      assert.deepStrictEqual(yield* reads("checkout"), { enabled: false, variant: "classic", value: { steps: 3 } })
      yield* TestClock.setTime(10_000)
      assert.deepStrictEqual(yield* reads("checkout"), { enabled: true, variant: "one-page", value: { steps: 1 } })
    }).pipe(Effect.provide(registry)))

  it.effect("an override applies at once: new variants, a moved schedule, a kill-switch", () =>
    Effect.gen(function*() {
      const flags = yield* FlagRegistry
      yield* TestClock.setTime(15_000)
      yield* flags.override("checkout", {
        variants: [{ name: "wizard", value: { steps: 5 } }, { name: "classic", value: { steps: 3 }, weight: 0 }]
      }, ops)
      assert.deepStrictEqual(yield* reads("checkout"), { enabled: true, variant: "wizard", value: { steps: 5 } })
      // The override's schedule, on the same clock: not active until 20 000.
      yield* flags.override("checkout", { schedule: { activateAt: 20_000 } }, ops)
      assert.deepStrictEqual(yield* reads("checkout"), { enabled: false, variant: "classic", value: { steps: 3 } })
      yield* TestClock.setTime(20_000)
      assert.deepStrictEqual(yield* reads("checkout"), { enabled: true, variant: "wizard", value: { steps: 5 } })
      // Off without an offVariant: nothing is served.
      assert.deepStrictEqual(yield* reads("layout"), { enabled: true, variant: "a", value: "A" })
      yield* flags.override("layout", { enabled: false }, ops)
      assert.deepStrictEqual(yield* reads("layout"), { enabled: false, variant: null, value: null })
      yield* flags.clearOverride("layout", ops)
      assert.deepStrictEqual(yield* reads("layout"), { enabled: true, variant: "a", value: "A" })
    }).pipe(Effect.provide(registry)))

  it.effect("a kill-switch serves its boolean as value and no variant; an unknown key serves nothing", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* reads("beta"), { enabled: false, variant: null, value: false })
      yield* Effect.flatMap(FlagRegistry, (flags) => flags.toggle("beta", ops))
      assert.deepStrictEqual(yield* reads("beta"), { enabled: true, variant: null, value: true })
      assert.deepStrictEqual(yield* reads("nope"), { enabled: false, variant: null, value: null })
    }).pipe(Effect.provide(registry)))

  it.effect("a typed flag read by key: the same variant, its value as declared (encoded JSON)", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* flagVariant(ctx, "theme"), yield* flagVariant(ctx, Theme))
      assert.deepStrictEqual(yield* flagValue(ctx, "theme"), { accent: "blue" })
      assert.deepStrictEqual(yield* flagValue(ctx, Theme), { accent: "blue" })
    }).pipe(Effect.provide(registry)))
})

describe("flag reads by key count as server-side use", () => {
  const sqlite = Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerLocal),
    Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables.all)).pipe(Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })))),
    Layer.orDie
  )

  it.scoped("flagValue and flagVariant by key are counted under their own sources", () =>
    Effect.gen(function*() {
      const flags = yield* FlagRegistry
      yield* TestClock.setTime(10_000)
      yield* flagValue(ctx, "checkout")
      yield* flagValue(ctx, "beta")
      yield* flagVariant(ctx, "checkout")
      // Unknown keys count nothing.
      yield* flagValue(ctx, "nope")
      yield* flags.flushUsage
      const rows = yield* Effect.flatMap(Store.Store, (store) => store.find(FlagUsage, { orderBy: "flag" }))
      assert.deepStrictEqual(rows.map((row) => [row.flag, row.source, row.count]).sort(), [
        ["beta", "flagValue", 1],
        ["checkout", "flagValue", 1],
        ["checkout", "flagVariant", 1]
      ])
    }).pipe(Effect.provide(layerSql({ flags: { checkout, beta: false } }).pipe(Layer.provideMerge(sqlite)))))
})

describe("evaluateVariant is a pure function of its arguments", () => {
  const scheduled: Flag = { schedule: { activateAt: 1_000 } }

  it("the definition it is given at the `now` it is given: a schedule boundary", () => {
    assert.deepStrictEqual(evaluateVariant("w", scheduled, alice, 999), { name: "off", value: false, enabled: false })
    assert.deepStrictEqual(evaluateVariant("w", scheduled, alice, 1_000), { name: "on", value: true, enabled: true })
    assert.deepStrictEqual(evaluateVariant("checkout", checkout, alice, 9_999), { name: "classic", value: { steps: 3 }, enabled: false })
  })

  it("without `now`, a scheduled flag is refused (it reads no clock); a flag without a schedule needs none", () => {
    assert.throws(() => evaluateVariant("w", scheduled, alice), FlagDefinitionError)
    assert.throws(() => evaluateVariant("w", scheduled, alice), /the flag has a schedule, so its answer depends on the time: pass `now`/)
    assert.deepStrictEqual(evaluateVariant("k", true, alice), { name: "on", value: true, enabled: true })
  })

  it.effect("in a fiber with a registry and a TestClock, it still answers from its arguments alone (no override)", () =>
    Effect.gen(function*() {
      const flags = yield* FlagRegistry
      yield* TestClock.setTime(50_000)
      yield* flags.override("checkout", { enabled: false }, ops)
      assert.deepStrictEqual(yield* reads("checkout"), { enabled: false, variant: "classic", value: { steps: 3 } })
      assert.deepStrictEqual(evaluateVariant("checkout", checkout, alice, 50_000), { name: "one-page", value: { steps: 1 }, enabled: true })
      assert.throws(() => evaluateVariant("checkout", checkout, alice), /pass `now`/)
    }).pipe(Effect.provide(registry)))
})
