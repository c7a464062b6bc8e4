/**
 * A stager's work on a one-row insert written as a part of ONE PostgreSQL statement: the row's
 * INSERT and every stager's part (row history's version, the fleet outbox row) run as one
 * autocommitted data-modifying CTE, one round trip instead of BEGIN, the row, each part, COMMIT.
 *
 * ```sql
 * WITH "row" AS (INSERT INTO "notes" (…) VALUES (…) ON CONFLICT ("id") DO NOTHING RETURNING "id"),
 *   "p1" AS (INSERT INTO "_fw_row_history" (…) SELECT … FROM "row", LATERAL (SELECT max("version") …) head),
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
 * `PgFusedInsert`). A part with a set form (`statementForRows`: history's version, the outbox row)
 * is ONE insert for every row of the batch, reading the rows' values from a VALUES list joined to
 * the inserted rows; any other part is written per row, reading from a CTE of that row alone.
 * PostgreSQL starts executor nodes per CTE, so per-row parts cost every row of a batch their
 * start-up: with history and the outbox, the backend's CPU per row was 0.038 ms per row against
 * 0.032 ms in the set form for batches of 8, 0.035 against 0.021 ms for batches of 32
 * (`bench/store/fusedBatch.ts`; each row past the first adds about 0.035 against 0.018 ms).
 */
import { Predicate } from "effect"

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
   * The part's set form (optional): its data-modifying statement written ONCE for every row of a
   * batch (see `composeBatch`), where `statement` would be written once per row. `rows` names a
   * relation holding one row per inserted row of the batch (none for a taken id): `"id"`, the
   * row's id, and one column per value; `value(i)` is the column of `values[i]`, of type `text`
   * (each value is bound as text: give strings, numbers, booleans or null, and cast as the target
   * needs, e.g. `::jsonb`, `::double precision`). What the statement reads per row besides goes in
   * a `LATERAL` subquery. Like `statement`, it must never hide a clash (see the module docs).
   *
   * A part with `onResult` returns, per row written, a column `rowIdColumn` holding the id of the
   * row it wrote for (as text): one statement writes for many rows, and the order of its
   * `RETURNING` is no contract. Parts of one key all have a set form or none.
   */
  readonly statementForRows?: (rows: string, value: (index: number) => string) => string
  /**
   * Names the statement's text: parts with the same key build the same text from the same number
   * of values, so the fused text is built once per table and keys, not per write.
   */
  readonly key?: string
  /**
   * Called with the first row of the statement's `RETURNING` (as JSON) once the fused statement
   * committed; a part with `onResult` must return a row for an inserted row. In a batch's set form,
   * with the row of that `RETURNING` that names this part's row (see `statementForRows`).
   */
  readonly onResult?: (returned: Readonly<Record<string, unknown>>) => void
}

/**
 * The column of a set-form part's `RETURNING` naming the id of the row each result belongs to
 * (see `Part.statementForRows`).
 */
export const rowIdColumn = "rowId"

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

/** A batch's statement and the reader of its answer. */
export interface FusedBatch {
  readonly text: string
  readonly parameters: ReadonlyArray<unknown>
  /**
   * Reads the statement's answer (its one row): calls `onResult` of each inserted row's parts with
   * that row's `RETURNING`, and answers per row, in order, whether it was inserted (false: its id
   * was taken, and none of its parts wrote).
   */
  readonly answer: (result: Readonly<Record<string, unknown>>) => ReadonlyArray<boolean>
}

/** The result column of a batch naming the inserted rows' ids (a JSON array; null when none). */
const insertedColumn = "inserted"

/**
 * Where a part's results are read in a batch's answer: one column holding the `RETURNING` rows of
 * every row (set form, a JSON array), or one column per row (undefined: no `onResult`).
 */
type Results =
  | { readonly _tag: "Set"; readonly column: string }
  | { readonly _tag: "PerRow"; readonly columns: ReadonlyArray<string> }
  | undefined

interface BatchShape {
  readonly text: string
  /** Per part, by index: where its results are read. */
  readonly results: ReadonlyArray<Results>
}

const batchShapes = new Map<string, BatchShape>()
/** Batch texts kept at most (one per table, part keys and batch size in use). */
const batchShapesKept = 256

/**
 * The text of a batch of `rows` rows of `width` insert values each, whose parts are `parts` (the
 * first row's: every row's have the same keys, so the same forms and numbers of values).
 * Parameters: every row's insert values in turn, then every row's parts' values in turn.
 */
const batchShapeOf = (insert: string, width: number, rows: number, parts: ReadonlyArray<Part>): BatchShape => {
  const partWidths = parts.map((part) => part.values.length)
  const rowWidth = partWidths.reduce((sum, n) => sum + n, 0)
  /** The placeholder of the `index`th value of part `p` of row `r`. */
  const placeholder = (r: number, p: number, index: number) => {
    let at = width * rows + r * rowWidth + index
    for (let q = 0; q < p; q++) at += partWidths[q]!
    return `$${at + 1}`
  }
  const ctes = [`"row" AS (${insert})`]
  const selected = [`(SELECT json_agg("id") FROM "row") AS "${insertedColumn}"`]
  const results: Array<Results> = []
  let perRowRows = false
  for (let p = 0; p < parts.length; p++) {
    const part = parts[p]!
    if (part.statementForRows !== undefined) {
      // The rows' values, joined to the rows inserted: a taken id has no row here, so the part
      // writes nothing for it. The id's placeholder is the row's own (typed by the insert); the
      // values are cast to text, the type the part is promised.
      const rowsName = `v${p}`
      const names = [`"id"`, ...Array.from({ length: partWidths[p]! }, (_, i) => `"c${i}"`)]
      const tuples: Array<string> = []
      for (let r = 0; r < rows; r++) {
        const cells = [`$${r * width + 1}`]
        for (let i = 0; i < partWidths[p]!; i++) cells.push(`${placeholder(r, p, i)}::text`)
        tuples.push(`(${cells.join(", ")})`)
      }
      ctes.push(
        `"${rowsName}" AS (SELECT v.* FROM (VALUES ${tuples.join(", ")}) AS v(${names.join(", ")}) ` +
          `JOIN "row" ON "row"."id" = v."id")`
      )
      const name = `s${p}`
      ctes.push(`"${name}" AS (${part.statementForRows(`"${rowsName}"`, (index) => `"${rowsName}"."c${index}"`)})`)
      if (part.onResult === undefined) {
        results.push(undefined)
      } else {
        selected.push(`(SELECT json_agg("${name}") FROM "${name}") AS "${name}"`)
        results.push({ _tag: "Set", column: name })
      }
      continue
    }
    // No set form: the part is written per row, reading a CTE of that row alone.
    if (!perRowRows) {
      perRowRows = true
      for (let r = 0; r < rows; r++) ctes.push(`"r${r}" AS (SELECT "id" FROM "row" WHERE "id" = $${r * width + 1})`)
    }
    const columns: Array<string> = []
    for (let r = 0; r < rows; r++) {
      const name = `r${r}p${p}`
      ctes.push(`"${name}" AS (${part.statement(`"r${r}"`, (index) => placeholder(r, p, index))})`)
      if (part.onResult !== undefined) {
        selected.push(`(SELECT to_jsonb("${name}") FROM "${name}" LIMIT 1) AS "${name}"`)
        columns.push(name)
      }
    }
    results.push(part.onResult === undefined ? undefined : { _tag: "PerRow", columns })
  }
  // Data-modifying CTEs run to completion whether the final SELECT reads them or not.
  return { text: `WITH ${ctes.join(", ")} SELECT ${selected.join(", ")}`, results }
}

/**
 * The fused statement of several one-row inserts of one table whose parts have the same keys, as
 * ONE statement and so one transaction and one commit (group commit): `insert` inserts the rows
 * with placeholders `$1`… for every row's values in turn, `ON CONFLICT ("id") DO NOTHING RETURNING
 * "id"`; the id comes first among a row's values. A part with a set form is one statement for all
 * rows, reading the rows' values joined to the inserted rows; any other part is written per row,
 * reading a CTE of that row alone (its id when inserted, else nothing). Either way a taken id
 * writes none of that row's parts and the others' go on. The rows' ids must differ. The answer is
 * one row: the inserted ids, and the parts' `RETURNING` as JSON (see `FusedBatch.answer`).
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
    if (batchShapes.size >= batchShapesKept) batchShapes.clear()
    batchShapes.set(key, shape = batchShapeOf(insert, width, rows.length, rows[0]!.parts))
  }
  const parameters: Array<unknown> = []
  for (const row of rows) for (const value of row.values) parameters.push(value)
  for (const row of rows) for (const part of row.parts) for (const value of part.values) parameters.push(value)
  const { results } = shape
  return {
    text: shape.text,
    parameters,
    answer: (result) => {
      const ids = result[insertedColumn]
      const inserted = new Set<string>()
      if (Array.isArray(ids)) for (const id of ids) inserted.add(String(id))
      const written = rows.map((row) => inserted.has(String(row.values[0])))
      for (let p = 0; p < results.length; p++) {
        const where = results[p]
        if (where === undefined) continue
        if (where._tag === "PerRow") {
          for (let r = 0; r < rows.length; r++) {
            const returned = result[where.columns[r]!]
            if (written[r] && Predicate.isRecord(returned)) rows[r]!.parts[p]!.onResult!(returned)
          }
          continue
        }
        const returned = result[where.column]
        if (!Array.isArray(returned)) continue
        let byId: Map<string, number> | undefined
        for (const one of returned) {
          if (!Predicate.isRecord(one)) continue
          byId ??= new Map(rows.map((row, r) => [String(row.values[0]), r]))
          const r = byId.get(String(one[rowIdColumn]))
          if (r !== undefined && written[r]) rows[r]!.parts[p]!.onResult!(one)
        }
      }
      return written
    }
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
