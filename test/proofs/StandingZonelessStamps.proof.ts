/**
 * PROOF (standing, not fixed here). A freshness expectation reads its column's date strings with
 * `Date.parse` (`Expectation.timestampOf`): a zone-less date-time is read in the process's local
 * zone, so the same row is hours older or younger depending on the server — replicas in different
 * zones disagree on whether an SLA is violated. Flags and search had the same defect (fixed on
 * this branch: test/flags/Instants.test.ts, test/search/FilterInstants.test.ts).
 *
 * Run: npx vitest run --config test/proofs/vitest.config.ts
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
  it("a zone-less date-time is the same instant in every process time zone", () => {
    const utc = inZone("UTC", () => timestampOf("2026-03-01T09:00:00"))
    const newYork = inZone("America/New_York", () => timestampOf("2026-03-01T09:00:00"))
    assert.strictEqual(newYork, utc)
  })
})
