/**
 * A stager's work on a one-row insert written as a part of ONE PostgreSQL statement: the row's
 * INSERT and every stager's part (row history's version, the fleet outbox row) run as one
 * autocommitted data-modifying CTE, one round trip instead of BEGIN, the row, each part, COMMIT.
 *
 * ```sql
 * WITH "row" AS (INSERT INTO "notes" (…) VALUES (…) ON CONFLICT ("id") DO NOTHING RETURNING "id"),
 *   "p1" AS (INSERT INTO "_fw_row_history" (…) SELECT … FROM "row", (SELECT max("version") …) head),
 *   "p2" AS (INSERT INTO _fw_change_outbox (…) SELECT … FROM "row" RETURNING id, xid)
 * SELECT (SELECT to_jsonb("p2") FROM "p2" LIMIT 1) AS "p2" FROM "row"
 * ```
 *
 * The store fuses a one-row insert only outside a transaction, without a tracer or a statement
 * transformer, on PostgreSQL, when every stager (and the fleet tap) gives a part for the change;
 * anything else takes the client's transaction. Outcomes:
 * - the id is taken: `ON CONFLICT DO NOTHING` leaves `row` empty, so no part writes (each reads
 *   `FROM row`), and the insert answers `DuplicateRow` as it would in a transaction;
 * - a part fails (a history version that clashes: the statement's snapshot was taken before it
 *   waited on the row's lock, so a concurrent delete and re-insert of the id can make its
 *   `max(version) + 1` stale): nothing is written, and the store runs the insert again in a
 *   transaction, where each statement reads the newest versions. A part must therefore never hide
 *   a clash (no `ON CONFLICT DO NOTHING`);
 * - the connection fails before the answer: the outcome is unknown (`CommitUnknown`), as for a
 *   COMMIT cut off.
 *
 * `composeBatch` writes several such inserts of one table as one statement (group commit, see
 * `PgFusedInsert`): each row's parts read from a CTE of that row alone.
 */

/** One stager's part of the fused statement. */
export interface Part {
  /** The values the statement binds, in order. */
  readonly values: ReadonlyArray<unknown>
  /**
   * The part's data-modifying statement, e.g. `INSERT … SELECT … FROM ${row}`: it must write only
   * for a row of the CTE named `row` (one column, `"id"`; empty when the id was taken). `value(i)`
   * is the placeholder (`$n`) of `values[i]`.
   */
  readonly statement: (row: string, value: (index: number) => string) => string
  /**
   * Names the statement's text: parts with the same key build the same text from the same number
   * of values, so the fused text is built once per table and keys, not per write.
   */
  readonly key?: string
  /**
   * Called with the first row of the statement's `RETURNING` (as JSON) once the fused statement
   * committed; a part with `onResult` must return a row for an inserted row.
   */
  readonly onResult?: (returned: Readonly<Record<string, unknown>>) => void
}

/** The fused statement: its text, parameters, and the parts that read their `RETURNING`. */
export interface Fused {
  readonly text: string
  /** Whether `text` is built once for every write of its table and parts' keys (worth preparing by name). */
  readonly reused: boolean
  readonly parameters: ReadonlyArray<unknown>
  /** Parts with `onResult`, with the result column each reads. */
  readonly returning: ReadonlyArray<{ readonly column: string; readonly part: Part }>
}

/** The fused text of one insert text and part keys, and which result column each part reads. */
interface Shape {
  readonly text: string
  readonly columns: ReadonlyArray<string | undefined>
}

const shapes = new Map<string, Map<string, Shape>>()
/** Shapes kept per insert text at most (keys are few; a bound guards against unbounded ones). */
const shapesKept = 64

/**
 * Appends the CTEs of `parts` writing for the row of the CTE `row`, named `${prefix}${i}`, their
 * placeholders numbered from `offset`, and the result columns of those with `onResult` to
 * `selected`. Answers each part's result column (undefined: no `onResult`) and the next offset.
 */
const partsOf = (
  parts: ReadonlyArray<Part>,
  row: string,
  prefix: string,
  offset: number,
  ctes: Array<string>,
  selected: Array<string>
) => {
  let at = offset
  const columns: Array<string | undefined> = []
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    const name = `${prefix}${i}`
    const first = at
    ctes.push(`"${name}" AS (${part.statement(`"${row}"`, (index) => `$${first + index + 1}`)})`)
    at += part.values.length
    if (part.onResult === undefined) {
      columns.push(undefined)
    } else {
      columns.push(name)
      selected.push(`(SELECT to_jsonb("${name}") FROM "${name}" LIMIT 1) AS "${name}"`)
    }
  }
  return { columns, at }
}

const shapeOf = (insert: string, offset: number, parts: ReadonlyArray<Part>): Shape => {
  const ctes = [`"row" AS (${insert})`]
  const selected: Array<string> = []
  const { columns } = partsOf(parts, "row", "p", offset, ctes, selected)
  // Data-modifying CTEs run to completion whether the final SELECT reads them or not.
  const text = `WITH ${ctes.join(", ")} SELECT ${selected.length === 0 ? `"row"."id"` : selected.join(", ")} FROM "row"`
  return { text, columns }
}

/** The parts' keys as one string; `undefined` when a part has none (its text is built per write). */
export const keysOf = (parts: ReadonlyArray<Part>): string | undefined => {
  let keys = ""
  for (const part of parts) {
    if (part.key === undefined) return undefined
    keys += `${part.key}\u0000`
  }
  return keys
}

/**
 * The fused statement of a row's `insert` (an `INSERT … ON CONFLICT ("id") DO NOTHING RETURNING
 * "id"` whose placeholders are `$1`…`$n` for `values`) and `parts`. It answers one row when the
 * row was inserted, none when its id was taken.
 */
export const compose = (insert: string, values: ReadonlyArray<unknown>, parts: ReadonlyArray<Part>): Fused => {
  const parameters = values.slice()
  for (const part of parts) for (const value of part.values) parameters.push(value)
  const keys = keysOf(parts)
  let shape: Shape | undefined
  if (keys !== undefined) {
    let byKeys = shapes.get(insert)
    if (byKeys === undefined) shapes.set(insert, byKeys = new Map())
    shape = byKeys.get(keys)
    if (shape === undefined) {
      if (byKeys.size >= shapesKept) byKeys.clear()
      byKeys.set(keys, shape = shapeOf(insert, values.length, parts))
    }
  } else {
    shape = shapeOf(insert, values.length, parts)
  }
  const returning: Array<{ readonly column: string; readonly part: Part }> = []
  for (let i = 0; i < parts.length; i++) {
    const column = shape.columns[i]
    if (column !== undefined) returning.push({ column, part: parts[i]! })
  }
  return { text: shape.text, reused: keys !== undefined, parameters, returning }
}

/** One row of a batch (see `composeBatch`): its insert's values and its stagers' parts. */
export interface BatchRow {
  readonly values: ReadonlyArray<unknown>
  readonly parts: ReadonlyArray<Part>
}

/** A batch's statement, and per row the column saying it was inserted and its parts' result columns. */
export interface FusedBatch {
  readonly text: string
  readonly parameters: ReadonlyArray<unknown>
  readonly rows: ReadonlyArray<{
    /** The result column holding the row's id when it was inserted, null when its id was taken. */
    readonly inserted: string
    readonly returning: ReadonlyArray<{ readonly column: string; readonly part: Part }>
  }>
}

interface BatchShape {
  readonly text: string
  /** Per row: its `inserted` column and each part's result column (undefined: no `onResult`). */
  readonly columns: ReadonlyArray<ReadonlyArray<string | undefined>>
}

const batchShapes = new Map<string, BatchShape>()
/** Batch texts kept at most (one per table, part keys and batch size in use). */
const batchShapesKept = 256

/**
 * The fused statement of several one-row inserts of one table whose parts have the same keys, as
 * ONE statement and so one transaction and one commit (group commit): `insert` inserts the rows
 * with placeholders `$1`… for every row's values in turn, `ON CONFLICT ("id") DO NOTHING RETURNING
 * "id"`; the id comes first among a row's values. Each row gets a CTE of its own
 * (its id when inserted, else nothing) and its parts read from it exactly as in `compose`, so a
 * taken id writes none of that row's parts and the others' go on. The rows' ids must differ. The
 * answer is one row: per row its id (null when taken) and its parts' `RETURNING` as JSON.
 */
export const composeBatch = (
  insert: string,
  rows: ReadonlyArray<BatchRow>,
  keys: string
): FusedBatch => {
  const width = rows[0]!.values.length
  const key = `${insert}\u0000${keys}\u0000${rows.length}`
  let shape = batchShapes.get(key)
  if (shape === undefined) {
    let at = width * rows.length
    const ctes = [`"row" AS (${insert})`]
    const selected: Array<string> = []
    const columns: Array<Array<string | undefined>> = []
    for (let r = 0; r < rows.length; r++) {
      const mine = `r${r}`
      ctes.push(`"${mine}" AS (SELECT "id" FROM "row" WHERE "id" = $${r * width + 1})`)
      selected.push(`(SELECT "id" FROM "${mine}") AS "${mine}"`)
      const written = partsOf(rows[r]!.parts, mine, `${mine}p`, at, ctes, selected)
      at = written.at
      columns.push([mine, ...written.columns])
    }
    if (batchShapes.size >= batchShapesKept) batchShapes.clear()
    batchShapes.set(key, shape = { text: `WITH ${ctes.join(", ")} SELECT ${selected.join(", ")}`, columns })
  }
  const parameters: Array<unknown> = []
  for (const row of rows) for (const value of row.values) parameters.push(value)
  for (const row of rows) for (const part of row.parts) for (const value of part.values) parameters.push(value)
  return {
    text: shape.text,
    parameters,
    rows: rows.map((row, r) => {
      const columns = shape.columns[r]!
      const returning: Array<{ readonly column: string; readonly part: Part }> = []
      for (let i = 0; i < row.parts.length; i++) {
        const column = columns[i + 1]
        if (column !== undefined) returning.push({ column, part: row.parts[i]! })
      }
      return { inserted: columns[0]!, returning }
    })
  }
}

/**
 * The outcome of a fused statement that wrote nothing and was refused by the server (a part's
 * clash, a constraint): the store runs the insert again in a transaction, which answers as the
 * insert always did.
 */
export const Refused: unique symbol = Symbol.for("@fw/framework/FusedStage/Refused")
/** The type of `Refused`. */
export type Refused = typeof Refused
