/**
 * A row history version as PostgreSQL writes it in one statement: the next version after the row's
 * newest, read in the same statement, with its record — on the writing transaction's connection
 * (`stageOne`) or as a part of the one-statement insert (`versionPart`, see `FusedStage`) — and the
 * data a version keeps of a change (`dataOf`).
 */
import type { Connection } from "@effect/sql/SqlConnection"
import { Effect } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import { DuplicateRow } from "../kernel/Errors.js"
import type { StoreError } from "../kernel/Errors.js"
import type * as FusedStage from "../kernel/store/FusedStage.js"
import { unavailable } from "../kernel/drivers/sql/SqlDriver.js"
import { RowHistory } from "./tables.js"

/** A change as row history records it. */
export type Change = Pick<ChangeEvent, "table" | "op" | "id" | "tenantId" | "after" | "at" | "provenance">

/** Columns not stored, per table (`Options.excludeColumns`). */
export type ExcludeColumns = Readonly<Record<string, ReadonlyArray<string>>> | undefined

/** The data a version keeps of `change`: its row after the write without the excluded columns (`null` after a delete). */
export const dataOf = (excludeColumns: ExcludeColumns, change: Change) => {
  const excluded = excludeColumns?.[change.table] ?? []
  return change.after === null
    ? null
    : Object.fromEntries(Object.entries(change.after).filter(([column]) => !excluded.includes(column)))
}

/**
 * The INSERT of one version, as `recordsOf` would make it: the next version after the row's newest
 * (read in the same statement) and its record, `changedAt` never running backwards. `p` names the
 * change's values (placeholders, or a relation's columns); `from` is what the version is written
 * for: nothing, the fused statement's inserted row, or a batch's inserted rows with their values
 * (one version per row; the newest version is read per row, hence `LATERAL`).
 */
const versionInsert = (
  p: {
    readonly table: string
    readonly id: string
    readonly op: string
    readonly data: string
    readonly at: string
    readonly tenant: string
    readonly trace: string
    readonly subject: string
    readonly procedure: string
  },
  from: string | undefined
) =>
  `INSERT INTO "${RowHistory.name}"
  ("id", "tableName", "rowId", "version", "op", "data", "changedAt", "tenantId", "traceId", "subjectId", "procedure")
  SELECT ${p.table}::text || ':' || ${p.id}::text || ':' || lpad(head.version::text, 10, '0'), ${p.table}, ${p.id}, head.version,
    ${p.op}, ${p.data}::jsonb, GREATEST(${p.at}::double precision, head.at), ${p.tenant}, ${p.trace}, ${p.subject}, ${p.procedure}
  FROM ${from === undefined ? "" : `${from}, LATERAL `}(SELECT coalesce(max("version"), 0) + 1 AS version, coalesce(max("changedAt"), ${p.at}::double precision) AS at
    FROM "${RowHistory.name}" WHERE "tableName" = ${p.table} AND "rowId" = ${p.id}) head`

/**
 * One version in one PostgreSQL statement on the writing transaction's connection, under the row
 * lock the write holds. A clash (history edited by hand) inserts nothing and is reported.
 */
const versionStatement = `${
  versionInsert({
    table: "$1",
    id: "$2",
    op: "$3",
    data: "$4",
    at: "$5",
    tenant: "$6",
    trace: "$7",
    subject: "$8",
    procedure: "$9"
  }, undefined)
} ON CONFLICT ("id") DO NOTHING RETURNING "id"`

/** The parameters of `versionInsert` for `change`, in its order. */
const versionValues = (excludeColumns: ExcludeColumns, change: Change): ReadonlyArray<unknown> => {
  // No column excluded for the table: the row serialises as its copy would (a copy is an entries
  // array, a pair per column and an object, per write).
  const data = excludeColumns?.[change.table] === undefined ? change.after : dataOf(excludeColumns, change)
  return [
    change.table,
    change.id,
    change.op,
    data === null ? null : JSON.stringify(data),
    change.at,
    change.tenantId,
    change.provenance.traceId,
    change.provenance.subjectId,
    change.provenance.procedure
  ]
}

/**
 * The fused version insert for `from` (one inserted row, or a batch's rows with their values as
 * text columns: every value is cast where its column is not text), values by `value`.
 */
const versionFused = (from: string, value: (index: number) => string) =>
  versionInsert({
    table: value(0),
    id: value(1),
    op: value(2),
    data: value(3),
    at: value(4),
    tenant: value(5),
    trace: value(6),
    subject: value(7),
    procedure: value(8)
  }, from)

/**
 * The version of an inserted row as a part of the fused one-statement insert (see `FusedStage`),
 * with its set form: one insert writes the versions of a whole batch. No `ON CONFLICT` here: the
 * statement's snapshot predates its wait on the row's lock, so after a concurrent delete and
 * re-insert of the id its version may clash; the clash fails the statement, and the store writes
 * the row (every row of a batch) again in a transaction, where the version is read afresh.
 */
export const versionPart = (excludeColumns: ExcludeColumns, change: Change): FusedStage.Part => ({
  key: "history:version",
  values: versionValues(excludeColumns, change),
  statement: versionFused,
  statementForRows: versionFused
})

export const stageOne = (connection: Connection, excludeColumns: ExcludeColumns, change: Change): Effect.Effect<void, StoreError> =>
  connection.execute(versionStatement, versionValues(excludeColumns, change), undefined).pipe(
    Effect.mapError(unavailable),
    Effect.flatMap((rows) =>
      // Only a version written past the row's lock (history edited by hand) can collide.
      rows.length === 1 ? Effect.void : Effect.fail(new DuplicateRow({ table: RowHistory.name, id: `${change.table}:${change.id}` }))
    )
  )
