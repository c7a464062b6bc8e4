/**
 * Flag evaluation (spec 3.8, DESIGN "Flags"): each step, each targeting key, the edge rules,
 * schedules and ramps across their boundaries on the TestClock, the published bucket vectors,
 * distributions and ramp monotonicity.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Schema, TestClock } from "effect"
import * as Bucket from "../../src/flags/Bucket.js"
import * as Compile from "../../src/flags/Compile.js"
import * as Definition from "../../src/flags/Definition.js"
import * as Evaluate from "../../src/flags/Evaluate.js"
import {
  defineFlag,
  evaluateVariant,
  FlagRegistry,
  flagValue,
  flagVariant,
  isFlagEnabled,
  layerMemory,
  requireFlag
} from "../../src/flags/index.js"
import type { Flag } from "../../src/flags/index.js"
import * as Subject from "../../src/kernel/Subject.js"
import { vectors } from "./vectors.js"

const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme", metadata: { plan: "pro", seats: 50, beta: true } })
const bob = Subject.make({ type: "user", id: "bob", tenantId: "globex", metadata: { plan: "free", seats: "50" } })
const robot = Subject.make({ type: "apiKey", id: "key-1", tenantId: "acme" })
const anon = Subject.anonymous

/** The reference answer, checked against the hot path's compiled evaluator. */
const on = (flag: Flag, subject: Subject.Subject, now = 0, key = "f") => {
  const resolved = Definition.resolve(key, flag)
  const answer = Evaluate.isOn(resolved, subject, now)
  assert.strictEqual(Compile.compile(resolved)(subject, now), answer, "compiled evaluator")
  return answer
}
const reason = (flag: Flag, subject: Subject.Subject, now = 0, key = "f") => Evaluate.decide(Definition.resolve(key, flag), subject, now)

describe("bucketing", () => {
  it("murmur3 x86 32 hashes UTF-8 bytes (reference values of the C++ implementation)", () => {
    assert.strictEqual(Bucket.murmur3("My hovercraft is full of eels.", 0), 2953494853)
    assert.strictEqual(Bucket.murmur3("吉 星 高 照", 0), 3435142074)
    assert.strictEqual(Bucket.murmur3("", 0), 0)
  })

  it("the published test vectors", () => {
    for (const [flag, unit, hash, bucket, variantBucket] of vectors) {
      assert.strictEqual(Bucket.murmur3(`${flag}:${unit}`, 0), hash, `${flag}:${unit}`)
      assert.strictEqual(Bucket.bucketOf(flag, unit), bucket, `${flag}:${unit}`)
      assert.strictEqual(Bucket.bucketOf(flag, unit, Bucket.variantSeed), variantBucket, `${flag}:${unit} variant`)
    }
  })

  it("a rollout of p % admits buckets below round(p × 100): 0.07 % is 7 buckets", () => {
    assert.strictEqual(Bucket.threshold(0.07), 7)
    assert.strictEqual(Bucket.threshold(30), 3000)
    assert.strictEqual(Bucket.threshold(12.345), 1235)
    // user-1 is bucket 631 of new-checkout: on at 6.32 %, off at 6.31 %.
    const subject = Subject.make({ type: "user", id: "user-1", tenantId: null })
    assert.isTrue(on({ rollout: 6.32 }, subject, 0, "new-checkout"))
    assert.isFalse(on({ rollout: 6.31 }, subject, 0, "new-checkout"))
  })

  it("30 % of 20,000 units, within ±1.5 points (full 100,000 in bench/flags)", () => {
    const flag = Definition.resolve("distribution", { rollout: 30 })
    let count = 0
    const n = 20_000
    for (let i = 0; i < n; i++) if (Evaluate.isOn(flag, Subject.make({ type: "user", id: `u${i}`, tenantId: null }), 0)) count++
    assert.approximately(count / n, 0.3, 0.015)
  })

  it("variants 3:1 over 20,000 units, within ±1.5 points, independent of a 10 % rollout", () => {
    const flag = Definition.resolve("split", {
      rollout: 10,
      variants: [{ name: "a", value: 1, weight: 3 }, { name: "b", value: 2, weight: 1 }]
    })
    let served = 0
    let a = 0
    const n = 20_000
    for (let i = 0; i < n; i++) {
      const subject = Subject.make({ type: "user", id: `u${i}`, tenantId: null })
      const variant = Evaluate.variantFor(flag, subject, Evaluate.decide(flag, subject, 0) === "on")
      if (variant === null) continue
      served++
      if (variant.name === "a") a++
    }
    // Inside a 10 % rollout the variant split is still 3:1 (a shared seed would skew it).
    assert.approximately(served / n, 0.1, 0.015)
    assert.approximately(a / served, 0.75, 0.03)
  })

  it("rollouts of two flags are independent (the key is in the hash)", () => {
    const f = Definition.resolve("one", { rollout: 50 })
    const g = Definition.resolve("two", { rollout: 50 })
    let both = 0
    for (let i = 0; i < 10_000; i++) {
      const s = Subject.make({ type: "user", id: `u${i}`, tenantId: null })
      if (Evaluate.isOn(f, s, 0) && Evaluate.isOn(g, s, 0)) both++
    }
    assert.approximately(both / 10_000, 0.25, 0.02)
  })

  it("a ramp from 10 % to 50 % never turns a unit off", () => {
    const flag = Definition.resolve("ramped", { schedule: { ramp: { from: 10, to: 50, startAt: 1_000, endAt: 101_000 } } })
    const units = Array.from({ length: 2_000 }, (_, i) => Subject.make({ type: "user", id: `u${i}`, tenantId: null }))
    let previous = units.map(() => false)
    let previousCount = 0
    for (let now = 0; now <= 102_000; now += 1_000) {
      const current = units.map((unit) => Evaluate.isOn(flag, unit, now))
      current.forEach((isOn, i) => assert.isTrue(isOn || !previous[i], `unit ${i} turned off at ${now}`))
      const count = current.filter(Boolean).length
      assert.isTrue(count >= previousCount)
      previous = current
      previousCount = count
    }
    assert.approximately(previousCount / units.length, 0.5, 0.04)
  })
})

describe("evaluation order (first failing step ends as off)", () => {
  it("enabled:false beats everything (kill-switch over schedule, targeting and rollout)", () => {
    const flag: Flag = { enabled: false, rollout: 100, targeting: [{}], schedule: { activateAt: 0 } }
    assert.strictEqual(reason(flag, alice, 10), "disabled")
    assert.isFalse(on(false, alice))
    assert.isTrue(on(true, alice))
  })

  it("schedule before targeting, targeting before rollout", () => {
    const flag: Flag = { schedule: { activateAt: 100 }, targeting: [{ subjectIds: ["bob"] }], rollout: 0 }
    assert.strictEqual(reason(flag, alice, 50), "notYetActive")
    assert.strictEqual(reason(flag, alice, 150), "notTargeted")
    assert.strictEqual(reason(flag, bob, 150), "outOfRollout")
  })

  it("defaults: an object flag without enabled is enabled, without rollout on for everyone (anonymous too)", () => {
    assert.isTrue(on({}, alice))
    assert.isTrue(on({}, anon))
    assert.isTrue(on({ rollout: 100 }, anon))
  })

  it("a caller without the rollout unit is off below 100 %", () => {
    assert.strictEqual(reason({ rollout: 99.99 }, anon), "noUnit")
    const noTenant = Subject.make({ type: "user", id: "x", tenantId: null })
    assert.strictEqual(reason({ rollout: 50, rolloutBy: "tenant" }, noTenant), "noUnit")
    assert.isTrue(on({ rollout: 100, rolloutBy: "tenant" }, noTenant))
  })

  it("rolloutBy tenant buckets the tenant: every member agrees", () => {
    const flag = Definition.resolve("tenant-flag", { rollout: 50, rolloutBy: "tenant" })
    for (let t = 0; t < 50; t++) {
      const answers = new Set(
        Array.from({ length: 5 }, (_, i) => Evaluate.isOn(flag, Subject.make({ type: "user", id: `u${i}`, tenantId: `t${t}` }), 0))
      )
      assert.strictEqual(answers.size, 1)
    }
    assert.strictEqual(
      Evaluate.isOn(flag, Subject.make({ type: "user", id: "x", tenantId: "tenant-acme" }), 0),
      Bucket.bucketOf("tenant-flag", "tenant-acme") < 5000
    )
  })
})

describe("targeting", () => {
  it("no targeting or targeting: [] is no restriction; a rule {} matches everyone", () => {
    assert.isTrue(on({ targeting: [] }, bob))
    assert.isTrue(on({ targeting: [{}] }, anon))
  })

  it("subjectIds: exact strings (no case folding, no Unicode normalisation); an empty list matches no one", () => {
    assert.isTrue(on({ targeting: [{ subjectIds: ["alice"] }] }, alice))
    assert.isFalse(on({ targeting: [{ subjectIds: ["Alice"] }] }, alice))
    const composed = Subject.make({ type: "user", id: "jos\u00e9", tenantId: null })
    assert.isFalse(on({ targeting: [{ subjectIds: ["jose\u0301"] }] }, composed))
    assert.isFalse(on({ targeting: [{ subjectIds: [] }] }, alice))
  })

  it("tenantIds: a tenant-less caller never matches", () => {
    assert.isTrue(on({ targeting: [{ tenantIds: ["acme"] }] }, alice))
    assert.isFalse(on({ targeting: [{ tenantIds: ["acme"] }] }, bob))
    assert.isFalse(on({ targeting: [{ tenantIds: ["acme"] }] }, anon))
    assert.isFalse(on({ targeting: [{ tenantIds: [] }] }, alice))
  })

  it("subjectTypes", () => {
    assert.isTrue(on({ targeting: [{ subjectTypes: ["apiKey"] }] }, robot))
    assert.isFalse(on({ targeting: [{ subjectTypes: ["apiKey"] }] }, alice))
    assert.isFalse(on({ targeting: [{ subjectTypes: [] }] }, robot))
  })

  it("metadata compares strictly ('50' is not 50) and needs every key", () => {
    assert.isTrue(on({ targeting: [{ metadata: { seats: 50 } }] }, alice))
    assert.isFalse(on({ targeting: [{ metadata: { seats: 50 } }] }, bob))
    assert.isTrue(on({ targeting: [{ metadata: { seats: "50" } }] }, bob))
    assert.isTrue(on({ targeting: [{ metadata: { plan: "pro", beta: true } }] }, alice))
    assert.isFalse(on({ targeting: [{ metadata: { plan: "pro", beta: false } }] }, alice))
    assert.isFalse(on({ targeting: [{ metadata: { toString: null } }] }, alice))
    assert.isTrue(on({ targeting: [{ metadata: {} }] }, alice))
  })

  it("keys of one rule are ANDed, rules are ORed", () => {
    const flag: Flag = { targeting: [{ tenantIds: ["acme"], subjectTypes: ["apiKey"] }, { subjectIds: ["bob"] }] }
    assert.isTrue(on(flag, robot))
    assert.isFalse(on(flag, alice))
    assert.isTrue(on(flag, bob))
  })
})

describe("variants", () => {
  const variants = [{ name: "control", value: "blue" }, { name: "treatment", value: { color: "green" } }]

  it("a boolean flag yields the synthetic on/off variant", () => {
    assert.deepStrictEqual(evaluateVariant("k", true, alice), { name: "on", value: true, enabled: true })
    assert.deepStrictEqual(evaluateVariant("k", false, alice), { name: "off", value: false, enabled: false })
  })

  it("off serves offVariant, else null; the offVariant counts as off", () => {
    assert.deepStrictEqual(evaluateVariant("k", { enabled: false, variants, offVariant: "control" }, alice), {
      name: "control",
      value: "blue",
      enabled: false
    })
    assert.isNull(evaluateVariant("k", { enabled: false, variants }, alice))
    const onlyOff: Flag = { variants: [{ name: "control", value: "blue" }], offVariant: "control" }
    assert.strictEqual(evaluateVariant("k", onlyOff, alice)?.enabled, false)
    assert.isFalse(on(onlyOff, alice))
  })

  it("omitted weights split evenly; weight 0 is never served; a unit keeps its variant", () => {
    const flag = Definition.resolve("even", { variants })
    const counts = { control: 0, treatment: 0 }
    for (let i = 0; i < 10_000; i++) {
      const s = Subject.make({ type: "user", id: `u${i}`, tenantId: null })
      counts[Evaluate.variantFor(flag, s, true)!.name as "control" | "treatment"]++
    }
    assert.approximately(counts.control / 10_000, 0.5, 0.02)
    const zero = Definition.resolve("zero", { variants: [{ name: "a", value: 1, weight: 0 }, { name: "b", value: 2 }] })
    for (let i = 0; i < 1_000; i++) {
      assert.strictEqual(Evaluate.variantFor(zero, Subject.make({ type: "user", id: `u${i}`, tenantId: null }), true)!.name, "b")
    }
    assert.deepStrictEqual(evaluateVariant("k", { variants }, alice), evaluateVariant("k", { variants }, alice))
  })
})

describe("schedules and ramps on the TestClock", () => {
  const at = (ms: number) => TestClock.setTime(ms)
  const registry = layerMemory({
    flags: {
      window: { schedule: { activateAt: 1_000, deactivateAt: "1970-01-01T00:00:02.000Z" } },
      ramp: { rollout: 0, schedule: { ramp: { from: 0, to: 100, startAt: 10_000, endAt: 20_000 } } }
    }
  })

  it.effect("off before activateAt, on inside the window, off at and after deactivateAt", () =>
    Effect.gen(function*() {
      const ctx = { subject: alice }
      yield* at(999)
      assert.isFalse(yield* isFlagEnabled(ctx, "window"))
      yield* at(1_000)
      assert.isTrue(yield* isFlagEnabled(ctx, "window"))
      yield* at(1_999)
      assert.isTrue(yield* isFlagEnabled(ctx, "window"))
      yield* at(2_000)
      assert.isFalse(yield* isFlagEnabled(ctx, "window"))
    }).pipe(Effect.provide(registry)))

  it.effect("a ramp replaces the static rollout: from before startAt, linear between, to after endAt", () =>
    Effect.gen(function*() {
      const flags = yield* FlagRegistry
      const units = Array.from({ length: 4_000 }, (_, i) => Subject.make({ type: "user", id: `u${i}`, tenantId: null }))
      const share = Effect.map(Effect.forEach(units, (subject) => isFlagEnabled({ subject }, "ramp")), (all) => all.filter(Boolean).length / units.length)
      yield* at(9_999)
      assert.strictEqual(yield* share, 0)
      yield* at(15_000)
      assert.approximately(yield* share, 0.5, 0.04)
      assert.strictEqual(Evaluate.percentageAt(flags.resolved("ramp")!, 12_500), 25)
      yield* at(20_000)
      assert.strictEqual(yield* share, 1)
      yield* TestClock.adjust("1000 days")
      assert.strictEqual(yield* share, 1)
    }).pipe(Effect.provide(registry)))

  it.effect("unknown keys are off", () =>
    Effect.map(isFlagEnabled({ subject: alice }, "nope"), (value) => assert.isFalse(value)).pipe(Effect.provide(registry)))
})

describe("typed flags in handlers", () => {
  const Theme = defineFlag({
    key: "theme",
    value: Schema.Literal("light", "dark", "contrast"),
    default: "light",
    targeting: [{ tenantIds: ["acme"] }],
    variants: [{ name: "classic", value: "light" }, { name: "night", value: "dark", weight: 3 }, { name: "a11y", value: "contrast", weight: 0 }],
    offVariant: "classic"
  })
  const Limits = defineFlag({ key: "limits", value: Schema.Struct({ max: Schema.Number }), default: { max: 10 }, enabled: false })
  const registry = layerMemory({ typedFlags: [Theme, Limits] })

  it.effect("flagValue serves the drawn variant's typed value, the offVariant when off, the default without variants", () =>
    Effect.gen(function*() {
      const outside = { subject: bob }
      assert.strictEqual(yield* flagValue(outside, Theme), "light")
      assert.strictEqual(yield* flagVariant(outside, Theme), "classic")
      assert.isFalse(yield* isFlagEnabled(outside, "theme"))
      const drawn = new Set<string>()
      for (let i = 0; i < 200; i++) {
        const ctx = { subject: Subject.make({ type: "user", id: `u${i}`, tenantId: "acme" }) }
        const name = yield* flagVariant(ctx, Theme)
        const value = yield* flagValue(ctx, Theme)
        drawn.add(`${name}=${value}`)
        assert.strictEqual(yield* isFlagEnabled(ctx, "theme"), name !== "classic")
      }
      assert.deepStrictEqual([...drawn].sort(), ["classic=light", "night=dark"])
      assert.deepStrictEqual(yield* flagValue({ subject: alice }, Limits), { max: 10 })
      assert.isNull(yield* flagVariant({ subject: alice }, Limits))
    }).pipe(Effect.provide(registry)))

  it.effect("requireFlag(ctx, key) fails FlagDisabled for a caller the flag is off for", () =>
    Effect.gen(function*() {
      const refused = yield* Effect.flip(requireFlag({ subject: bob }, "theme"))
      assert.strictEqual(refused._tag, "FlagDisabled")
      assert.strictEqual(refused.flag, "theme")
      assert.match(refused.message, /"theme" is not enabled/)
    }).pipe(Effect.provide(registry)))

  it.effect("without a registry in the fiber, a clear defect", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(isFlagEnabled({ subject: alice }, "theme"))
      assert.isTrue(exit._tag === "Failure" && Cause.pretty(exit.cause).includes("no FlagRegistry in this fiber"))
    }))
})
