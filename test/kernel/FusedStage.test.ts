/**
 * The fused statement's text and parameters: each part's placeholders follow the row's values and
 * the parts before it; a text named by its parts' keys is built once and serves later writes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FusedStage from "../../src/kernel/FusedStage.js"

const insert = `INSERT INTO "t" ("id", "v") VALUES ($1, $2) ON CONFLICT ("id") DO NOTHING RETURNING "id"`

let built = 0
const part = (key: string | undefined, values: ReadonlyArray<unknown>, returns: boolean): FusedStage.Part => ({
  ...(key === undefined ? {} : { key }),
  values,
  statement: (row, value) => {
    built++
    return `INSERT INTO "${key ?? "x"}" SELECT ${values.map((_, i) => value(i)).join(", ")} FROM ${row}${returns ? ` RETURNING 1 AS one` : ""}`
  },
  ...(returns ? { onResult: () => undefined } : {})
})

describe("FusedStage.compose", () => {
  it("numbers each part's values after the row's and the earlier parts'; returning parts get their columns", () => {
    const fused = FusedStage.compose(insert, ["r", 1], [part("a", ["x", "y"], false), part("b", ["z"], true)])
    assert.strictEqual(
      fused.text,
      `WITH "row" AS (${insert}), "p0" AS (INSERT INTO "a" SELECT $3, $4 FROM "row"), ` +
        `"p1" AS (INSERT INTO "b" SELECT $5 FROM "row" RETURNING 1 AS one) ` +
        `SELECT (SELECT to_jsonb("p1") FROM "p1" LIMIT 1) AS "p1" FROM "row"`
    )
    assert.deepStrictEqual(fused.parameters, ["r", 1, "x", "y", "z"])
    assert.deepStrictEqual(fused.returning.map((r) => r.column), ["p1"])
  })

  it("a text named by keys is built once; a part without a key builds it every time", () => {
    built = 0
    const first = FusedStage.compose(insert, ["r1", 1], [part("k", ["a"], false)])
    const second = FusedStage.compose(insert, ["r2", 2], [part("k", ["b"], false)])
    assert.strictEqual(built, 1)
    assert.strictEqual(first.text, second.text)
    assert.deepStrictEqual(second.parameters, ["r2", 2, "b"])
    FusedStage.compose(insert, ["r3", 3], [part(undefined, ["c"], false)])
    FusedStage.compose(insert, ["r4", 4], [part(undefined, ["d"], false)])
    assert.strictEqual(built, 3)
    // No part: the row's insert alone, answering its id.
    assert.strictEqual(FusedStage.compose(insert, ["r", 1], []).text, `WITH "row" AS (${insert}) SELECT "row"."id" FROM "row"`)
  })
})
