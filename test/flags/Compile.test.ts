/**
 * The hot path answers as the reference: `Bucket.bucketer` as `Bucket.bucketOf` (the published
 * vectors, then any strings, non-ASCII and lone surrogates included), `Compile.compile` as the
 * step-by-step `Evaluate.isOn` over generated flags, callers and times, and the fiber reads
 * (`isFlagEnabled` yielded in `Effect.gen`, where no fiber step is taken, or run as an effect)
 * alike, on the fiber's `TestClock`, with failures and a missing registry surfacing as before.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, FastCheck as fc, TestClock } from "effect"
import * as Bucket from "../../src/flags/Bucket.js"
import * as Compile from "../../src/flags/Compile.js"
import * as Definition from "../../src/flags/Definition.js"
import * as Evaluate from "../../src/flags/Evaluate.js"
import { isFlagEnabled, layerMemory, requireFlag } from "../../src/flags/index.js"
import * as Subject from "../../src/kernel/Subject.js"
import { vectors } from "./vectors.js"

const anyText = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.string({ unit: "grapheme", maxLength: 12 }),
  // Past the bucketer's first buffer (64 bytes), which has to grow.
  fc.string({ unit: "binary", minLength: 30, maxLength: 120 })
)

describe("Bucket.bucketer", () => {
  it("the published vectors", () => {
    for (const [flag, unit, , bucket, variantBucket] of vectors) {
      assert.strictEqual(Bucket.bucketer(flag, Bucket.rolloutSeed)(unit), bucket, `${flag}:${unit}`)
      assert.strictEqual(Bucket.bucketer(flag, Bucket.variantSeed)(unit), variantBucket, `${flag}:${unit} variant`)
    }
  })

  it("equals bucketOf for any key and unit id, with either seed, called again and again", () => {
    fc.assert(
      fc.property(anyText.filter((key) => key.length > 0), fc.array(anyText, { minLength: 1, maxLength: 6 }), (key, units) => {
        const rollout = Bucket.bucketer(key, Bucket.rolloutSeed)
        const variant = Bucket.bucketer(key, Bucket.variantSeed)
        for (const unit of [...units, ...units]) {
          assert.strictEqual(rollout(unit), Bucket.bucketOf(key, unit, Bucket.rolloutSeed))
          assert.strictEqual(variant(unit), Bucket.bucketOf(key, unit, Bucket.variantSeed))
        }
      }),
      { numRuns: 500 }
    )
  })
})

const ids = ["u1", "u2", "u3", "josé", "ユーザー"]
const tenants = ["acme", "globex", "initech"]
const types = ["user", "apiKey", "anonymous"]
const metadataValues: ReadonlyArray<Definition.MetadataValue> = ["pro", "free", "50", 50, true, false, null]
const metadataKeys = ["plan", "seats", "beta", "constructor"]

const sample = <A>(values: ReadonlyArray<A>) => fc.constantFrom(...values)
const subList = <A>(values: ReadonlyArray<A>) => fc.subarray([...values])

const rule: fc.Arbitrary<Definition.Rule> = fc.record({
  subjectIds: subList(ids),
  tenantIds: subList(tenants),
  subjectTypes: subList(types),
  metadata: fc.dictionary(sample(metadataKeys), sample(metadataValues), { maxKeys: 2 })
}, { requiredKeys: [] })

const keys = ["f", "new-checkout", "dark-mode"]
// Rollouts on the boundary of a unit's bucket (b / 100 admits buckets below b, so not that unit).
const boundaries = keys.flatMap((key) =>
  [...ids, ...tenants].flatMap((unit) => {
    const bucket = Bucket.bucketOf(key, unit)
    return [bucket / 100, (bucket + 1) / 100]
  })
)
const percentage = fc.oneof(
  sample([0, 0.07, 6.31, 30, 50, 99.99, 100]),
  sample(boundaries),
  fc.double({ min: 0, max: 100, noNaN: true })
)
const instant = fc.integer({ min: 0, max: 4_000 })

const flag: fc.Arbitrary<Definition.FlagObject> = fc.record({
  enabled: fc.boolean(),
  rollout: percentage,
  rolloutBy: sample(["tenant", "subject"] as const),
  targeting: fc.array(rule, { maxLength: 4 }),
  variants: fc.array(fc.nat({ max: 3 }), { maxLength: 3 }).map((weights) =>
    weights.length > 0 && weights.every((weight) => weight === 0) ? [...weights, 1] : weights
  ).map((weights) => weights.map((weight, i) => ({ name: `v${i}`, value: i, weight }))),
  offVariantIndex: fc.nat({ max: 3 }),
  schedule: fc.record({
    activateAt: instant,
    deactivateAt: instant.map((ms) => ms + 4_001),
    ramp: fc.record({ from: percentage, to: percentage, startAt: instant, endAt: instant.map((ms) => ms + 4_001) })
  }, { requiredKeys: [] })
}, { requiredKeys: [] }).map(({ offVariantIndex, ...definition }) => {
  const variants = definition.variants ?? []
  const offVariant = offVariantIndex !== undefined && offVariantIndex < variants.length ? variants[offVariantIndex]!.name : undefined
  return offVariant === undefined ? definition : { ...definition, offVariant }
})

const subject = fc.record({
  type: sample(types),
  id: sample(ids),
  tenantId: fc.option(sample(tenants), { nil: null }),
  metadata: fc.dictionary(sample(metadataKeys), sample(metadataValues), { maxKeys: 3 })
}).map((fields) => Subject.make(fields))

describe("Compile.compile", () => {
  it("answers as Evaluate.isOn for generated flags, callers and times", () => {
    fc.assert(
      fc.property(sample(keys), flag, fc.array(fc.tuple(subject, fc.integer({ min: 0, max: 9_000 })), { minLength: 1, maxLength: 20 }), (key, definition, calls) => {
        const resolved = Definition.resolve(key, definition)
        const compiled = Compile.compile(resolved)
        for (const [caller, now] of calls) {
          assert.strictEqual(compiled(caller, now), Evaluate.isOn(resolved, caller, now), JSON.stringify({ caller, now }))
        }
      }),
      { numRuns: 2_000 }
    )
  })

  it("the edge rules: {} matches everyone, an empty list no one, a boolean flag is its value", () => {
    const alice = Subject.make({ type: "user", id: "alice", tenantId: null })
    assert.isTrue(Compile.compile(Definition.resolve("f", { targeting: [{ subjectIds: [] }, {}] }))(alice, 0))
    assert.isFalse(Compile.compile(Definition.resolve("f", { targeting: [{ subjectIds: [] }, { tenantIds: [] }] }))(alice, 0))
    assert.isTrue(Compile.compile(Definition.resolve("f", true))(Subject.anonymous, 0))
    assert.isFalse(Compile.compile(Definition.resolve("f", false))(alice, 0))
  })
})

describe("fiber reads", () => {
  const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme" })
  const registry = layerMemory({
    flags: {
      window: { schedule: { activateAt: 1_000, deactivateAt: 2_000 } },
      tenants: { targeting: [{ tenantIds: ["acme"] }] }
    }
  })

  it.effect("yielded or run as an effect, a read answers at the fiber's TestClock, each time it is yielded", () =>
    Effect.gen(function*() {
      const ctx = { subject: alice }
      const check = isFlagEnabled(ctx, "window")
      const both = Effect.gen(function*() {
        const yielded = yield* check
        const run = yield* Effect.map(check, (on) => on)
        assert.strictEqual(yielded, run)
        return yielded
      })
      yield* TestClock.setTime(999)
      assert.isFalse(yield* both)
      yield* TestClock.setTime(1_000)
      assert.isTrue(yield* both)
      yield* TestClock.setTime(2_000)
      assert.isFalse(yield* both)
    }).pipe(Effect.provide(registry)))

  it.effect("a requireFlag refusal yielded in Effect.gen fails the fiber with FlagDisabled; a pass yields void", () =>
    Effect.gen(function*() {
      const outsider = { subject: Subject.make({ type: "user", id: "bob", tenantId: "globex" }) }
      const refused = yield* Effect.flip(Effect.gen(function*() {
        yield* requireFlag(outsider, "tenants")
        return "handler ran"
      }))
      assert.strictEqual(refused._tag, "FlagDisabled")
      assert.strictEqual(refused.flag, "tenants")
      assert.isUndefined(yield* requireFlag({ subject: alice }, "tenants"))
    }).pipe(Effect.provide(registry)))

  it.effect("without a registry, a read yielded in Effect.gen is the same clear defect", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Effect.gen(function*() {
        return yield* isFlagEnabled({ subject: alice }, "window")
      }))
      assert.isTrue(Exit.isFailure(exit) && Cause.pretty(exit.cause).includes("no FlagRegistry in this fiber"))
    }))
})
