/**
 * Freshness stamps written as strings name one instant on every server. `Date.parse` read a
 * zone-less date-time in the process's local zone (2026-03-01T09:00:00 was 09:00Z on a UTC server
 * and 14:00Z in New York: replicas disagreed on whether an SLA held) and rolled a day that does not
 * exist over (2026-02-30 → 2 March). A zone-less date-time is now UTC, as search reads a
 * document's; an impossible day is no timestamp.
 */
import { assert, describe, it } from "@effect/vitest"
import { timestampOf } from "../../src/standing/Expectation.js"

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

describe("standing: freshness stamps", () => {
  it("a zone-less date-time is the same instant, UTC, in every process time zone", () => {
    for (const zone of ["UTC", "America/New_York", "Asia/Tokyo"]) {
      assert.strictEqual(inZone(zone, () => timestampOf("2026-03-01T09:00:00")), Date.UTC(2026, 2, 1, 9), zone)
      assert.strictEqual(inZone(zone, () => timestampOf("2026-03-01 09:00")), Date.UTC(2026, 2, 1, 9), zone)
    }
  })

  it("a date-time with its zone, a date alone, a number and a Date keep their instant", () => {
    assert.strictEqual(timestampOf("2026-03-01T09:00:00+02:00"), Date.UTC(2026, 2, 1, 7))
    assert.strictEqual(timestampOf("2026-03-01T09:00:00.250Z"), Date.UTC(2026, 2, 1, 9, 0, 0, 250))
    assert.strictEqual(timestampOf("2026-03-01"), Date.UTC(2026, 2, 1))
    assert.strictEqual(timestampOf(1_000), 1_000)
    assert.strictEqual(timestampOf(new Date(2_000)), 2_000)
  })

  it("a day or time that does not exist, or a string that is not ISO-8601, is no timestamp", () => {
    for (const text of ["2026-02-30", "2026-02-30T09:00:00Z", "2026-03-01T25:00:00Z", "yesterday", "Sun, 01 Mar 2026 09:00:00 GMT"]) {
      assert.isNull(timestampOf(text), text)
    }
    assert.isNull(timestampOf(Number.NaN))
    assert.isNull(timestampOf(new Date(Number.NaN)))
  })
})
