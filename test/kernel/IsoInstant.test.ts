/** `IsoInstant.parse`: one instant per ISO-8601 string on every machine, whatever its time zone. */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import * as IsoInstant from "../../src/kernel/schema/IsoInstant.js"

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

const utc = (text: string) => IsoInstant.parse(text, "utc")

describe("IsoInstant.parse", () => {
  it("reads dates, date-times with Z or an offset, and fractions as Date.parse does", () => {
    for (const text of [
      "2026-03-01",
      "2026-03-01T09:00Z",
      "2026-03-01T09:00:00Z",
      "2026-03-01T09:00:00.5Z",
      "2026-03-01T09:00:00.123456Z",
      "2026-03-01T09:00:00+02:00",
      "2026-03-01T09:00:00-0530",
      "2024-02-29T23:59:59.999Z"
    ]) {
      assert.deepStrictEqual(utc(text), Either.right(Date.parse(text)), text)
    }
    assert.deepStrictEqual(utc("2026-03-01 09:00:00Z"), Either.right(Date.UTC(2026, 2, 1, 9)))
    assert.deepStrictEqual(utc("0050-01-01"), Either.right(Date.parse("0050-01-01")))
  })

  it("a zone-less date-time is UTC in every process time zone, or refused when the caller says so", () => {
    for (const zone of ["UTC", "America/New_York", "Asia/Kolkata"]) {
      inZone(zone, () => {
        assert.deepStrictEqual(utc("2026-03-01T09:00:00"), Either.right(Date.UTC(2026, 2, 1, 9)), zone)
        assert.deepStrictEqual(utc("2026-03-01T09:00"), Either.right(Date.UTC(2026, 2, 1, 9)), zone)
      })
    }
    assert.deepStrictEqual(IsoInstant.parse("2026-03-01T09:00:00", "refuse"), Either.left("zone-missing"))
    assert.deepStrictEqual(IsoInstant.parse("2026-03-01", "refuse"), Either.right(Date.UTC(2026, 2, 1)))
  })

  it("refuses a day, time or offset that does not exist instead of rolling it over, and what is not ISO-8601", () => {
    for (const text of ["2026-02-30", "2026-02-29T00:00Z", "2026-04-31", "2026-13-01", "2026-00-10", "2026-03-01T24:00:00Z", "2026-03-01T09:60Z", "2026-03-01T09:00:60Z", "2026-03-01T09:00+24:00"]) {
      assert.deepStrictEqual(utc(text), Either.left("no-such-time"), text)
    }
    for (const text of ["", "yesterday", "Sun, 01 Mar 2026 09:00:00 GMT", "2026-3-1", "2026-03-01T9:00Z", "2026-03-01T09:00:00ZZ", " 2026-03-01"]) {
      assert.deepStrictEqual(utc(text), Either.left("not-iso"), text)
    }
  })
})
