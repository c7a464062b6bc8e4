/**
 * Flags in words (the dashboard's Flags panel): the edge rules of targeting as sentences, a
 * disabled flag, a schedule and a ramp, and why a stale flag is a removal candidate.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FlagWords from "../../src/flags/FlagWords.js"
import type { ListEntry } from "../../src/flags/List.js"

const usage = { track: true, flushIntervalMs: 300_000, staleAfterDays: 30, retentionDays: 90 }
const entry = (patch: Partial<ListEntry>): ListEntry => ({
  key: "f",
  kind: "object",
  description: null,
  enabled: true,
  rollout: 100,
  rolloutBy: "subject",
  targetingRules: 0,
  variants: [],
  offVariant: null,
  schedule: { activateAt: null, deactivateAt: null, ramp: null },
  override: null,
  version: 1,
  lifecycle: { shape: "conditional", usage: "evaluated", lastEvaluatedAt: null, removalCandidate: false },
  ...patch
})

describe("flags in words", () => {
  it("targeting rules: keys ANDed, an empty list matches no one, {} everyone, metadata compared strictly", () => {
    assert.strictEqual(FlagWords.ruleWords({}), "everyone")
    assert.strictEqual(FlagWords.ruleWords({ subjectIds: [] }), "no one (subjectIds is an empty list)")
    assert.strictEqual(FlagWords.ruleWords({ tenantIds: ["a"], subjectTypes: ["user", "bot"] }), "tenant a and subject type user or bot")
    assert.strictEqual(FlagWords.ruleWords({ metadata: { seats: 50, tier: "50" } }), `metadata seats = 50 and metadata tier = "50"`)
  })

  it("a disabled flag stops at the first step; a schedule and a ramp say when", () => {
    assert.deepStrictEqual(FlagWords.steps(entry({ enabled: false, offVariant: "control" }), [], 0), [
      "Disabled: off for everyone.",
      "Serves the variant control while off."
    ])
    const start = Date.UTC(2026, 0, 1)
    const end = Date.UTC(2026, 0, 11)
    assert.deepStrictEqual(
      FlagWords.steps(entry({
        rollout: 30,
        rolloutBy: "tenant",
        schedule: { activateAt: start, deactivateAt: end, ramp: { from: 10, to: 50, startAt: start, endAt: end } }
      }), [], start + (end - start) / 2),
      [
        "Enabled.",
        "Live from 2026-01-01T00:00:00Z until 2026-01-11T00:00:00Z; off outside that window.",
        "Targets everyone.",
        "Rollout ramps from 10% at 2026-01-01T00:00:00Z to 50% at 2026-01-11T00:00:00Z, by tenant: 30% of targeted tenants now."
      ]
    )
  })

  it("a stale flag is a removal candidate because nothing read it, and says what to check", () => {
    const words = FlagWords.describe(
      entry({ lifecycle: { shape: "conditional", usage: "stale", lastEvaluatedAt: Date.UTC(2026, 0, 1), removalCandidate: true } }),
      [],
      usage,
      Date.UTC(2026, 3, 1)
    )
    assert.strictEqual(words.usage.label, "stale")
    assert.strictEqual(
      words.removal,
      "A removal candidate: not read by server code for more than 30 days (last 2026-01-01T00:00:00Z): probably nothing reads it any more. Check that no client reads it, then delete it and the code it guards."
    )
    assert.isNull(FlagWords.describe(entry({}), [], usage, 0).removal)
  })
})
