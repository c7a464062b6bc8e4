/**
 * Ordered date filters (spec 2.3: "ISO-8601 date string") compare instants, so a filter value must
 * name one instant on every machine: a date-time without a zone would be read in the process's
 * local zone (the same query would answer differently on servers in different zones) and a day
 * that does not exist would roll over (2026-02-30 → 2 March). Both are refused
 * `SearchQueryInvalid`; a date alone (UTC midnight) and a date-time with its zone pass. A
 * document's zone-less date-time is read as UTC, so the answer is the same on every server (and
 * the same whether the engine or the process reads it).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as Subject from "../../src/kernel/Subject.js"
import * as Memory from "../../src/search/Memory.js"
import * as Query from "../../src/search/Query.js"
import type { Resolved } from "../../src/search/Options.js"
import type { IndexSpec } from "../../src/search/SearchBackend.js"

const spec: IndexSpec = { index: "events", tenantField: "tenantId", searchableFields: ["title"], fields: { tenantId: "string", title: "string", at: "date" } }
const indexes = new Map([["events", { name: "events", spec, queryableFields: undefined } as unknown as Resolved]])
const alice = Subject.make({ type: "user", id: "alice", tenantId: "t1" })

/** Runs `f` with the process in time zone `zone` (Node reads `TZ` again when it is assigned). */
const inZone = <A, E>(zone: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const before = process.env.TZ
      process.env.TZ = zone
      return before
    }),
    () => effect,
    (before) => Effect.sync(() => {
      if (before === undefined) delete process.env.TZ
      else process.env.TZ = before
    })
  )

const run = (value: string, at = "2024-01-01T03:00:00Z") =>
  Effect.gen(function*() {
    const backend = Memory.make()
    yield* backend.upsert("events", [{ id: "e1", tenantId: "t1", title: "launch", at }])
    const { query } = yield* Query.validate(indexes, new Set(), { index: "events", filters: [{ field: "at", op: "gt", value }] }, alice)
    const result = yield* backend.query("events", query)
    return result.hits.map((hit) => hit.doc.id)
  })

describe("search.query: ordered date filters", () => {
  it.effect("a date alone or a date-time with its zone answers the same in every process time zone", () =>
    Effect.gen(function*() {
      for (const [value, expected] of [["2024-01-01", ["e1"]], ["2024-01-01T02:59:59Z", ["e1"]], ["2024-01-01T04:00:00+01:00", []], ["2023-12-31T23:00:00-05:00", []]] as const) {
        for (const zone of ["UTC", "America/New_York", "Asia/Tokyo"]) {
          assert.deepStrictEqual(yield* inZone(zone, run(value)), [...expected], `${value} in ${zone}`)
        }
      }
    }))

  it.effect("a document's date-time without a zone is read as UTC, not in the process's zone", () =>
    Effect.gen(function*() {
      for (const zone of ["UTC", "America/New_York", "Asia/Tokyo"]) {
        assert.deepStrictEqual(yield* inZone(zone, run("2024-01-01T02:59:59Z", "2024-01-01T03:00:00")), ["e1"], zone)
        assert.deepStrictEqual(yield* inZone(zone, run("2024-01-01T03:00:00Z", "2024-01-01T03:00:00")), [], zone)
        assert.deepStrictEqual(yield* inZone(zone, run("2024-01-01T03:00:00Z", "2024-01-01 03:00:00.5")), ["e1"], zone)
      }
    }))

  it.effect("a date-time without a zone, or a day that does not exist, is refused SearchQueryInvalid in every zone", () =>
    Effect.gen(function*() {
      for (const value of ["2024-01-01T00:00", "2024-01-01T00:00:00", "2024-01-01 00:00:00.5", "2026-02-30", "2026-02-29T00:00:00Z", "2026-04-31T01:00:00Z"]) {
        for (const zone of ["UTC", "America/New_York"]) {
          const exit = yield* Effect.exit(inZone(zone, run(value)))
          assert.isTrue(Exit.isFailure(exit), `${value} in ${zone}`)
          if (Exit.isFailure(exit)) {
            const error = exit.cause._tag === "Fail" ? exit.cause.error as { readonly _tag: string } : undefined
            assert.strictEqual(error?._tag, "SearchQueryInvalid", value)
          }
        }
      }
    }))
})
