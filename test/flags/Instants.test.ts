/**
 * Schedule instants (spec 2.11: "epoch millis or ISO strings") name one instant on every machine:
 * a date-time without a zone would be read in the process's local zone (so replicas in different
 * zones, or a laptop and a server, would switch a flag at different instants) and is refused, as
 * is a calendar date that does not exist (`Date.parse` rolls 2026-02-30 over to 2 March).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Definition from "../../src/flags/Definition.js"
import { FlagDefinitionError } from "../../src/flags/index.js"

/** Runs `f` with the process in time zone `zone` (Node reads `TZ` again when it is assigned). */
const inZone = <A>(zone: string, f: () => A): A => {
  const before = process.env.TZ
  process.env.TZ = zone
  try {
    return f()
  } finally {
    if (before === undefined) delete process.env.TZ
    else process.env.TZ = before
  }
}

const activateAt = (value: unknown) => Definition.resolve("launch", { schedule: { activateAt: value } }).activateAt

describe("flag schedule instants", () => {
  it("an ISO instant with a zone, or a date alone (UTC midnight), is the same instant in every process time zone", () => {
    for (const [text, ms] of [
      ["2026-03-01T09:00:00Z", Date.UTC(2026, 2, 1, 9)],
      ["2026-03-01T09:00:00.250+02:00", Date.UTC(2026, 2, 1, 7, 0, 0, 250)],
      ["2026-03-01T09:00-05:00", Date.UTC(2026, 2, 1, 14)],
      ["2026-03-01", Date.UTC(2026, 2, 1)]
    ] as const) {
      assert.strictEqual(inZone("UTC", () => activateAt(text)), ms, text)
      assert.strictEqual(inZone("America/New_York", () => activateAt(text)), ms, text)
      assert.strictEqual(inZone("Asia/Kolkata", () => activateAt(text)), ms, text)
    }
  })

  it("a date-time without a zone is refused rather than read in the server's local zone", () => {
    for (const text of ["2026-03-01T09:00:00", "2026-03-01T09:00", "2026-03-01 09:00"]) {
      for (const zone of ["UTC", "America/New_York"]) {
        assert.throws(() => inZone(zone, () => activateAt(text)), FlagDefinitionError)
        assert.throws(() => inZone(zone, () => activateAt(text)), /a time zone \(Z or an offset/)
      }
    }
  })

  it("a calendar date or time that does not exist is refused, not rolled over", () => {
    for (const text of ["2026-02-30", "2026-02-29T00:00:00Z", "2026-13-01", "2026-04-31T10:00:00Z", "2026-03-01T24:30:00Z", "2026-03-01T10:60:00Z"]) {
      assert.throws(() => activateAt(text), FlagDefinitionError, undefined, text)
    }
    assert.strictEqual(activateAt("2028-02-29T00:00:00Z"), Date.UTC(2028, 1, 29))
  })

  it("ramps and windows read the same strict instants", () => {
    assert.throws(() => Definition.resolve("r", { schedule: { ramp: { from: 0, to: 50, startAt: "2026-03-01T00:00:00", endAt: "2026-03-02T00:00:00Z" } } }), /ramp.startAt/)
    assert.throws(() => Definition.resolve("w", { schedule: { deactivateAt: "2026-02-30T00:00:00Z" } }), /deactivateAt/)
  })
})
