/**
 * The fused statement's text and parameters: each part's placeholders follow the row's values and
 * the parts before it; a text named by its parts' keys is built once and serves later writes. A
 * batch writes a set-form part once for all its rows, any other part once per row, and maps each
 * part's results back to its own row.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FusedStage from "../../src/kernel/store/FusedStage.js"

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

/** The multi-row insert of `n` rows of `"t"` (id and one value each). */
const insertOf = (n: number) =>
  `INSERT INTO "t" ("id", "v") VALUES ${
    Array.from({ length: n }, (_, r) => `($${2 * r + 1}, $${2 * r + 2})`).join(", ")
  } ON CONFLICT ("id") DO NOTHING RETURNING "id"`

/** A set-form part writing into `"s"` for row `id`, recording its results. */
const setPart = (id: string, seen: Array<string>): FusedStage.Part => ({
  key: "set",
  values: [`${id}-a`, 7],
  statement: (row, value) => `INSERT INTO "s" SELECT ${value(0)}, ${value(1)}::int FROM ${row} RETURNING "id" AS "rowId"`,
  statementForRows: (rows, value) =>
    `INSERT INTO "s" SELECT ${value(0)}, ${value(1)}::int FROM ${rows} RETURNING "id" AS "${FusedStage.rowIdColumn}"`,
  onResult: (returned) => void seen.push(`set:${id}:${String(returned[FusedStage.rowIdColumn])}:${String(returned.n)}`)
})

/** A part without a set form (a plugin's, say) writing into `"p"` for row `id`, recording its results. */
const rowPart = (id: string, seen: Array<string>): FusedStage.Part => ({
  key: "row",
  values: [`${id}-b`],
  statement: (row, value) => `INSERT INTO "p" SELECT ${value(0)} FROM ${row} RETURNING 1 AS one`,
  onResult: (returned) => void seen.push(`row:${id}:${String(returned.one)}`)
})

const count = (text: string, of: string) => text.split(of).length - 1

describe("FusedStage.composeBatch", () => {
  it("a set-form part is one statement whatever the batch's size, reading the rows' values joined to the inserted rows; a part without one is written per row", () => {
    for (const n of [2, 8, 32]) {
      const ids = Array.from({ length: n }, (_, r) => `i${r}`)
      const batch = FusedStage.composeBatch(
        insertOf(n),
        ids.map((id, r) => ({ values: [id, r], parts: [setPart(id, []), rowPart(id, [])] })),
        "set\u0000row\u0000"
      )
      assert.strictEqual(count(batch.text, `INSERT INTO "s"`), 1, `set form, ${n} rows`)
      assert.strictEqual(count(batch.text, `INSERT INTO "p"`), n, `per row, ${n} rows`)
      // Every row's insert values first, then every row's parts' values in turn.
      assert.deepStrictEqual(batch.parameters, [
        ...ids.flatMap((id, r) => [id, r]),
        ...ids.flatMap((id) => [`${id}-a`, 7, `${id}-b`])
      ])
    }
    const two = FusedStage.composeBatch(
      insertOf(2),
      ["x", "y"].map((id, r) => ({ values: [id, r], parts: [setPart(id, []), rowPart(id, [])] })),
      "set\u0000row\u0000"
    )
    assert.strictEqual(
      two.text,
      `WITH "row" AS (${insertOf(2)}), ` +
        `"v0" AS (SELECT v.* FROM (VALUES ($1, $5::text, $6::text), ($3, $8::text, $9::text)) AS v("id", "c0", "c1") ` +
        `JOIN "row" ON "row"."id" = v."id"), ` +
        `"s0" AS (INSERT INTO "s" SELECT "v0"."c0", "v0"."c1"::int FROM "v0" RETURNING "id" AS "rowId"), ` +
        `"r0" AS (SELECT "id" FROM "row" WHERE "id" = $1), "r1" AS (SELECT "id" FROM "row" WHERE "id" = $3), ` +
        `"r0p1" AS (INSERT INTO "p" SELECT $7 FROM "r0" RETURNING 1 AS one), ` +
        `"r1p1" AS (INSERT INTO "p" SELECT $10 FROM "r1" RETURNING 1 AS one) ` +
        `SELECT (SELECT json_agg("id") FROM "row") AS "inserted", (SELECT json_agg("s0") FROM "s0") AS "s0", ` +
        `(SELECT to_jsonb("r0p1") FROM "r0p1" LIMIT 1) AS "r0p1", (SELECT to_jsonb("r1p1") FROM "r1p1" LIMIT 1) AS "r1p1"`
    )
  })

  it("the answer says which rows were inserted and gives each inserted row's parts their own results, in any order; a taken id gets none", () => {
    const seen: Array<string> = []
    const ids = ["a", "b", "c"]
    const batch = FusedStage.composeBatch(
      insertOf(3),
      ids.map((id, r) => ({ values: [id, r], parts: [setPart(id, seen), rowPart(id, seen)] })),
      "set\u0000row\u0000"
    )
    // "b" was taken; the set-form results come in another order than the rows.
    const written = batch.answer({
      inserted: ["c", "a"],
      s0: [{ rowId: "c", n: 3 }, { rowId: "a", n: 1 }],
      r0p1: { one: 1 },
      r1p1: null,
      r2p1: { one: 1 }
    })
    assert.deepStrictEqual(written, [true, false, true])
    assert.deepStrictEqual(seen.sort(), ["row:a:1", "row:c:1", "set:a:a:1", "set:c:c:3"])
    // Nothing inserted: json_agg answers null.
    assert.deepStrictEqual(batch.answer({ inserted: null, s0: null, r0p1: null, r1p1: null, r2p1: null }), [false, false, false])
  })
})
