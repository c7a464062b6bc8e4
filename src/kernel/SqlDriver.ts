/**
 * The SQL tier over `@effect/sql`: one driver for SQLite and PostgreSQL (dialect from the client).
 * Values are stored per `Columns` (booleans as 0/1 and JSON as text on SQLite; JSONB on PostgreSQL)
 * and read back to the same encoded form on both.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Statement } from "@effect/sql"
import { Effect } from "effect"
import * as Columns from "./Columns.js"
import type * as Driver from "./Driver.js"
import { DuplicateRow, StoreUnavailable } from "./Errors.js"
import type * as Table from "./Table.js"

const causeCode = (error: SqlError): string | undefined => {
  const cause = error.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

const isUniqueViolation = (error: SqlError) => {
  const code = causeCode(error)
  return code === "23505" || code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "SQLITE_CONSTRAINT_UNIQUE"
}

/** The id a unique violation names (PostgreSQL says it in the detail), else the first row's. */
const duplicateId = (error: SqlError, rows: ReadonlyArray<Driver.Encoded>): string => {
  const detail = (error.cause as { readonly detail?: unknown } | undefined)?.detail
  const named = typeof detail === "string" ? /\(id\)=\((.*)\)/.exec(detail)?.[1] : undefined
  return named ?? String(rows[0]?.id)
}

/** Database failures become `StoreUnavailable`; the message names the failure, never the data. */
export const unavailable = (error: SqlError) =>
  new StoreUnavailable({ message: `database error: ${error.message}${causeCode(error) ? ` (${causeCode(error)})` : ""}` })

/** Builds the driver over the provided `SqlClient`. */
export const make: Effect.Effect<Driver.Driver, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })
  const columnsByTable = new WeakMap<Table.Any, ReadonlyMap<string, Columns.Column>>()
  const columnsOf = (table: Table.Any) => {
    let columns = columnsByTable.get(table)
    if (columns === undefined) {
      columns = new Map(Columns.of(table).map((c) => [c.name, c]))
      columnsByTable.set(table, columns)
    }
    return columns
  }

  const toDb = (column: Columns.Column | undefined, value: unknown): unknown => {
    if (value === undefined || value === null) return null
    switch (column?.kind) {
      case "boolean":
        return dialect === "sqlite" ? (value ? 1 : 0) : value
      case "json":
        return JSON.stringify(value)
      default:
        return value
    }
  }

  const fromDb = (table: Table.Any, row: Record<string, unknown>): Driver.Encoded => {
    const out: Record<string, unknown> = {}
    for (const column of columnsOf(table).values()) {
      const value = row[column.name]
      if (value === null || value === undefined) {
        if (!column.optional || column.nullable) out[column.name] = null
        continue
      }
      switch (column.kind) {
        case "boolean":
          out[column.name] = value === true || value === 1 || value === "1" || value === "t"
          break
        case "number":
          out[column.name] = Number(value)
          break
        case "json":
          out[column.name] = typeof value === "string" && dialect === "sqlite" ? JSON.parse(value) : value
          break
        default:
          out[column.name] = value
      }
    }
    return out
  }

  const toRow = (table: Table.Any, row: Driver.Encoded): Record<string, unknown> => {
    const out: Record<string, unknown> = {}
    for (const column of columnsOf(table).values()) out[column.name] = toDb(column, row[column.name])
    return out
  }

  const condition = (table: Table.Any, clause: Driver.Clause): Statement.Fragment => {
    const column = sql(clause.field)
    const value = (v: unknown) => toDb(columnsOf(table).get(clause.field), v)
    switch (clause.op) {
      case "eq":
        return sql`${column} = ${value(clause.value)}`
      case "neq":
        return sql`${column} <> ${value(clause.value)}`
      case "gt":
        return sql`${column} > ${value(clause.value)}`
      case "gte":
        return sql`${column} >= ${value(clause.value)}`
      case "lt":
        return sql`${column} < ${value(clause.value)}`
      case "lte":
        return sql`${column} <= ${value(clause.value)}`
      case "in": {
        const values = (clause.value as ReadonlyArray<unknown>).map(value)
        return values.length === 0 ? sql.literal("1 = 0") : sql`${column} IN ${sql.in(values)}`
      }
      case "nin": {
        const values = (clause.value as ReadonlyArray<unknown>).map(value)
        return values.length === 0
          ? sql`${column} IS NOT NULL`
          : sql`${column} IS NOT NULL AND ${column} NOT IN ${sql.in(values)}`
      }
    }
  }

  const whereOf = (table: Table.Any, where: ReadonlyArray<Driver.Clause>) =>
    where.length === 0 ? sql.literal("") : sql`WHERE ${sql.and(where.map((clause) => condition(table, clause)))}`

  const integer = (n: number) => sql.literal(String(Math.max(0, Math.floor(n))))

  const driver: Driver.Driver = {
    dialect,
    atomicStatements: true,
    insert: (table, rows) =>
      sql`INSERT INTO ${sql(table.name)} ${sql.insert(rows.map((row) => toRow(table, row)))}`.pipe(
        Effect.asVoid,
        Effect.mapError((error): DuplicateRow | StoreUnavailable =>
          isUniqueViolation(error) ? new DuplicateRow({ table: table.name, id: duplicateId(error, rows) }) : unavailable(error)
        )
      ),
    replace: (table, row) =>
      sql`UPDATE ${sql(table.name)} SET ${sql.update(toRow(table, row), ["id"])} WHERE ${sql("id")} = ${row.id as string}`.pipe(
        Effect.asVoid,
        Effect.mapError(unavailable)
      ),
    remove: (table, id) =>
      sql`DELETE FROM ${sql(table.name)} WHERE ${sql("id")} = ${id}`.pipe(Effect.asVoid, Effect.mapError(unavailable)),
    find: (table, query) => {
      const direction = query.direction === "desc" ? "DESC NULLS LAST" : "ASC NULLS FIRST"
      const limit = query.limit === undefined
        ? (query.offset ? (dialect === "sqlite" ? sql.literal("LIMIT -1") : sql.literal("")) : sql.literal(""))
        : sql`LIMIT ${integer(query.limit)}`
      const offset = query.offset ? sql`OFFSET ${integer(query.offset)}` : sql.literal("")
      const order = query.orderBy === "id"
        ? sql`ORDER BY ${sql("id")} ${sql.literal(query.direction === "desc" ? "DESC" : "ASC")}`
        : sql`ORDER BY ${sql(query.orderBy)} ${sql.literal(direction)}, ${sql("id")} ASC`
      return sql<Record<string, unknown>>`SELECT * FROM ${sql(table.name)} ${whereOf(table, query.where)} ${order} ${limit} ${offset}`.pipe(
        Effect.map((rows) => rows.map((row) => fromDb(table, row))),
        Effect.mapError(unavailable)
      )
    },
    count: (table, where) =>
      sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM ${sql(table.name)} ${whereOf(table, where)}`.pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0)),
        Effect.mapError(unavailable)
      ),
    transaction: (effect) =>
      sql.withTransaction(effect).pipe(
        Effect.catchIf(
          (error): error is SqlError => typeof error === "object" && error !== null && "_tag" in error && error._tag === "SqlError",
          (error) => Effect.fail(unavailable(error))
        )
      )
  }
  return driver
})
