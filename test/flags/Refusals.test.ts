/**
 * Construction and definition refusals (spec 7.1, 1–4): thrown at configuration time with a message
 * naming the flag and the field at fault.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { defineFlag, FlagDefinitionError, flagsPlugin } from "../../src/flags/index.js"
import type { ExperimentLike } from "../../src/flags/index.js"

const refused = (f: () => unknown, message: RegExp) => {
  assert.throws(f, FlagDefinitionError)
  assert.throws(f, message)
}

const Color = defineFlag({
  key: "color",
  value: Schema.Literal("blue", "green"),
  default: "blue",
  variants: [{ name: "control", value: "blue" }, { name: "treatment", value: "green" }],
  experiment: "button-color"
})

describe("construction refusals (spec 7.1)", () => {
  it("1: a key declared both in flags and in typedFlags", () => {
    refused(() => flagsPlugin({ flags: { color: true }, typedFlags: [Color], experiments: [] }), /"color" is declared both in flags and in typedFlags/)
  })

  it("2: usage tracking on the memory store", () => {
    refused(() => flagsPlugin({ flags: { a: true }, usage: { track: true } }), /usage tracking needs store: 'sql'/)
    assert.doesNotThrow(() => flagsPlugin({ flags: { a: true }, store: "sql", usage: { track: true } }))
  })

  it("3: staleAfterDays greater than retentionDays", () => {
    refused(() => flagsPlugin({ store: "sql", usage: { staleAfterDays: 31, retentionDays: 30 } }), /staleAfterDays \(31\) is greater than retentionDays \(30\)/)
  })

  describe("4: a flag's experiment", () => {
    const experiment = (over: Partial<ExperimentLike> = {}): ExperimentLike => ({
      name: "button-color",
      variants: [{ name: "treatment" }, { name: "control" }],
      variantFrom: "arm",
      ...over
    })
    it("missing", () => refused(() => flagsPlugin({ typedFlags: [Color] }), /experiment "button-color" is not among/))
    it("still in subject mode", () =>
      refused(() => flagsPlugin({ typedFlags: [Color], experiments: [{ name: "button-color", variants: [{ name: "control" }, { name: "treatment" }] }] }), /subject mode/))
    it("with an experiment-side holdout", () =>
      refused(() => flagsPlugin({ typedFlags: [Color], experiments: [experiment({ holdout: 0.1 })] }), /carries a holdout/))
    it("with arm names that differ from the flag's variants", () =>
      refused(() => flagsPlugin({ typedFlags: [Color], experiments: [experiment({ variants: [{ name: "control" }, { name: "green" }] })] }), /arms \[control, green\] differ from the flag's variants \[control, treatment\]/))
    it("a matching experiment is accepted", () => assert.doesNotThrow(() => flagsPlugin({ typedFlags: [Color], experiments: [experiment()] })))
  })
})

describe("definition refusals", () => {
  const cases: ReadonlyArray<readonly [unknown, RegExp]> = [
    [{ rollout: 100.5 }, /rollout must be a number from 0 to 100/],
    [{ rollout: Number.NaN }, /rollout must be a number from 0 to 100/],
    [{ enabled: "yes" }, /enabled must be a boolean/],
    [{ rolloutBy: "org" }, /rolloutBy must be "tenant"/],
    [{ targeting: [{ emails: ["a"] }] }, /targeting\[0\] has an unknown key "emails"/],
    [{ targeting: [{ subjectIds: "alice" }] }, /targeting\[0\].subjectIds must be a list of strings/],
    [{ targeting: [{ metadata: { plan: ["pro"] } }] }, /metadata.plan must be a string, finite number, boolean or null/],
    [{ variants: [{ name: "a", value: 1 }, { name: "a", value: 2 }] }, /variant "a" is declared twice/],
    [{ variants: [{ name: "a", value: 1, weight: -1 }] }, /weight must be a finite number ≥ 0/],
    [{ variants: [{ name: "a", value: 1, weight: 0 }] }, /at least one variant needs a positive weight/],
    [{ variants: [{ name: "a", value: 1 }], offVariant: "b" }, /offVariant "b" is not one of its variants/],
    [{ schedule: { activateAt: "tomorrow" } }, /schedule.activateAt must be epoch milliseconds or an ISO-8601 string/],
    [{ schedule: { activateAt: 10, deactivateAt: 10 } }, /deactivateAt must be after activateAt/],
    [{ schedule: { ramp: { from: 0, to: 50, startAt: 10, endAt: 5 } } }, /ramp.endAt must be after startAt/],
    [{ schedule: { ramp: { from: 0, to: 150, startAt: 0, endAt: 5 } } }, /ramp.to must be a number from 0 to 100/],
    [{ colour: "red" }, /unknown field "colour"/],
    ["on", /must be a boolean or an object/]
  ]
  it("each invalid field is refused with the flag key and the field", () => {
    for (const [flag, message] of cases) {
      refused(() => flagsPlugin({ flags: { bad: flag as never } }), message)
      refused(() => flagsPlugin({ flags: { bad: flag as never } }), /flag "bad"/)
    }
  })

  it("defineFlag: the default and every variant must satisfy the value schema; the default is decoded", () => {
    refused(() => defineFlag({ key: "n", value: Schema.Number, default: "1" as unknown as number }), /flag "n": the default fails the value schema/)
    refused(
      () => defineFlag({ key: "n", value: Schema.Number.pipe(Schema.int()), default: 1, variants: [{ name: "half", value: 0.5 }] }),
      /variant "half" fails the value schema/
    )
    const dated = defineFlag({ key: "d", value: Schema.DateFromString, default: new Date(0) })
    assert.instanceOf(dated.default, Date)
  })

  it("gatedBy must name a declared flag and a valid pattern", () => {
    refused(() => flagsPlugin({ flags: { a: true }, gatedBy: { "x.y": "b" } }), /gatedBy "x.y": no flag "b"/)
    refused(() => flagsPlugin({ flags: { a: true }, gatedBy: { "/(/": "a" } }), /invalid pattern/)
  })
})
