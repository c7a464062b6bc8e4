/**
 * The SQL tier over `@effect/sql`: one driver for SQLite and PostgreSQL (dialect from the client).
 * Values are stored per `Columns` (booleans as 0/1 and JSON as text on SQLite; JSONB on PostgreSQL)
 * and read back to the same encoded form on both. Database failures are `StoreUnavailable`.
 */
import { SqlClient } from "@effect/sql"
import type { Statement } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import type { Scope } from "effect"
import { Effect, Option } from "effect"
import * as Columns from "../../schema/Columns.js"
import * as Driver from "../../store/Driver.js"
import * as PgDirectDriver from "../pg/PgDirectDriver.js"
import * as PgFusedInsert from "../pg/PgFusedInsert.js"
import * as SqliteDirect from "../sqlite/SqliteDirect.js"
import * as SqlFailure from "./SqlFailure.js"
import * as SqliteDirectTransaction from "../sqlite/SqliteDirectTransaction.js"
import * as SqliteTransaction from "../sqlite/SqliteTransaction.js"
import { CommitUnknown, DuplicateRow, StoreUnavailable } from "../../Errors.js"
import type * as Table from "../../schema/Table.js"

/** The first id repeated within `rows`, if any. */
const repeatedId = (rows: ReadonlyArray<Driver.Encoded>): string | undefined => {
  const seen = new Set<unknown>()
  for (const row of rows) {
    if (seen.has(row.id)) return row.id as string
    seen.add(row.id)
  }
  return undefined
}

/** A database failure as `StoreUnavailable` (see `SqlFailure`). */
export const unavailable = SqlFailure.unavailable

/** Bind parameters per statement: SQLite allows 32766, PostgreSQL 65535. */
const maxParameters = { sqlite: 32_766, pg: 65_535 } as const
/** Rows per INSERT statement at most: larger statements stop paying off and churn the statement cache. */
const maxRowsPerInsert = 500
/** Ids per `DELETE … WHERE id IN (…)` of `deleteMany` (far under `maxParameters`; one statement stays short). */
const idsPerDelete = 1000

/** How one table's encoded rows map to database rows and back. */
interface Mapping {
  readonly columns: ReadonlyArray<Columns.Column>
  readonly byName: ReadonlyMap<string, Columns.Column>
  readonly toDb: (row: Driver.Encoded) => Record<string, unknown>
  readonly fromDb: (row: Readonly<Record<string, unknown>>) => Driver.Encoded
  readonly rowsPerInsert: number
}

const idOf = (row: Driver.Encoded) => row.id as string

/** A failure of the caller's effect, kept apart from the transaction's own `SqlError`s. */
class Inner<E> {
  constructor(readonly error: E) {}
}

/**
 * Builds the driver over the provided `SqlClient`. On PostgreSQL it reserves a connection for
 * direct point statements (see `PgDirectDriver`) for the lifetime of the scope.
 */
export const make: Effect.Effect<Driver.Driver, never, SqlClient.SqlClient | Scope.Scope> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })

  const valueToDb = (column: Columns.Column | undefined, value: unknown): unknown => {
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

  const valueFromDb = (column: Columns.Column, value: unknown): unknown => {
    switch (column.kind) {
      case "boolean":
        return value === true || value === 1 || value === "1" || value === "t"
      case "number":
        // PostgreSQL hands back 64-bit integers and numerics as strings.
        return typeof value === "number" ? value : Number(value)
      case "json":
        return typeof value === "string" && dialect === "sqlite" ? JSON.parse(value) : value
      default:
        return value
    }
  }

  const mappings = new WeakMap<Table.Any, Mapping>()
  const mappingOf = (table: Table.Any): Mapping => {
    let mapping = mappings.get(table)
    if (mapping !== undefined) return mapping
    const columns = Columns.of(table)
    mapping = {
      columns,
      byName: new Map(columns.map((column) => [column.name, column])),
      toDb: (row) => {
        const out: Record<string, unknown> = {}
        for (const column of columns) out[column.name] = valueToDb(column, row[column.name])
        return out
      },
      fromDb: (row) => {
        const out: Record<string, unknown> = {}
        for (const column of columns) {
          const value = row[column.name]
          if (value === null || value === undefined) {
            // An absent optional field reads back absent; a nullable one as null.
            if (!column.optional || column.nullable) out[column.name] = null
          } else {
            out[column.name] = valueFromDb(column, value)
          }
        }
        return out
      },
      rowsPerInsert: Math.max(1, Math.min(maxRowsPerInsert, Math.floor(maxParameters[dialect] / columns.length)))
    }
    mappings.set(table, mapping)
    return mapping
  }

  const condition = (mapping: Mapping, clause: Driver.Clause): Statement.Fragment => {
    const column = sql(clause.field)
    const value = (v: unknown) => valueToDb(mapping.byName.get(clause.field), v)
    if (clause.value === null) {
      return clause.op === "eq"
        ? sql`${column} IS NULL`
        : clause.op === "neq"
        ? sql`${column} IS NOT NULL`
        : sql.literal("1 = 0")
    }
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
        // As in memory: a null never satisfies a comparison.
        const values = (clause.value as ReadonlyArray<unknown>).map(value)
        return values.length === 0
          ? sql`${column} IS NOT NULL`
          : sql`${column} IS NOT NULL AND ${column} NOT IN ${sql.in(values)}`
      }
    }
  }

  const whereOf = (mapping: Mapping, where: ReadonlyArray<Driver.Clause>) =>
    where.length === 0 ? sql.literal("") : sql`WHERE ${sql.and(where.map((clause) => condition(mapping, clause)))}`

  const integer = (n: number) => sql.literal(String(Math.max(0, Math.floor(n))))

  /** Point statements by id, compiled once per table (the hot path skips the fragment compiler). */
  const placeholder = (n: number) => dialect === "pg" ? `$${n}` : "?"
  const quote = (identifier: string) => `"${identifier.replaceAll(`"`, `""`)}"`
  const pointSql = new WeakMap<
    Table.Any,
    { readonly get: string; readonly lock: string; readonly delete: string; readonly insert: string }
  >()
  const pointOf = (table: Table.Any) => {
    let statements = pointSql.get(table)
    if (statements === undefined) {
      const get = `SELECT * FROM ${quote(table.name)} WHERE "id" = ${placeholder(1)}`
      const columns = mappingOf(table).columns
      // The one-row insert, as one text.
      const insert = `INSERT INTO ${quote(table.name)} (${columns.map((column) => quote(column.name)).join(", ")}) VALUES (${
        columns.map((_, i) => placeholder(i + 1)).join(", ")
      }) ON CONFLICT ("id") DO NOTHING RETURNING "id"`
      statements = {
        get,
        lock: dialect === "pg" ? `${get} FOR UPDATE` : get,
        delete: `DELETE FROM ${quote(table.name)} WHERE "id" = ${placeholder(1)}`,
        insert
      }
      pointSql.set(table, statements)
    }
    return statements
  }

  /** The parameters of `pointOf(table).insert` for `row`, in column order. */
  const valuesOf = (table: Table.Any, row: Driver.Encoded): Array<unknown> => {
    const columns = mappingOf(table).columns
    const values: Array<unknown> = new Array(columns.length)
    for (let i = 0; i < columns.length; i++) values[i] = valueToDb(columns[i], row[columns[i]!.name])
    return values
  }

  /** The SELECT of `find`. */
  const findStatement = (table: Table.Any, query: Driver.Query) => {
    const mapping = mappingOf(table)
    const limit = query.limit !== undefined
      ? sql`LIMIT ${integer(query.limit)}`
      : query.offset && dialect === "sqlite"
      ? sql.literal("LIMIT -1") // SQLite needs a LIMIT before an OFFSET.
      : sql.literal("")
    const offset = query.offset ? sql`OFFSET ${integer(query.offset)}` : sql.literal("")
    const order = query.orderBy === "id"
      ? sql`ORDER BY ${sql("id")} ${sql.literal(query.direction === "desc" ? "DESC" : "ASC")}`
      : sql`ORDER BY ${sql(query.orderBy)} ${
        sql.literal(query.direction === "desc" ? "DESC NULLS LAST" : "ASC NULLS FIRST")
      }, ${sql("id")} ASC`
    return sql<Record<string, unknown>>`SELECT * FROM ${sql(table.name)} ${whereOf(mapping, query.where)} ${order} ${limit} ${offset}`
  }

  /**
   * Direct statements on SQLite (see `SqliteDirect`): a point read and a one-row insert in one
   * synchronous step. A failure reads as the client's would.
   */
  const direct = dialect === "sqlite" ? yield* SqliteDirect.make(sql) : undefined
  /** Transactions that end a refused COMMIT (see `SqliteTransaction`). */
  const sqliteClient = SqliteTransaction.applies(sql)
  const prepared = (on: SqliteDirect.Direct, source: string): SqliteDirect.Statement | StoreUnavailable => {
    try {
      return on.statement(source)
    } catch (cause) {
      return unavailable(new SqlError({ cause, message: "Failed to prepare statement " }))
    }
  }
  const step = (statement: SqliteDirect.Statement, parameters: ReadonlyArray<unknown>): unknown => {
    try {
      return statement.get(...parameters)
    } catch (cause) {
      return unavailable(new SqlError({ cause, message: "Failed to execute statement" }))
    }
  }
  /** A one-row insert on the handle, ready or not (the caller checked). */
  const insertDirect = (on: SqliteDirect.Direct, table: Table.Any, row: Driver.Encoded) => {
    const statement = prepared(on, pointOf(table).insert)
    if (statement instanceof StoreUnavailable) return statement
    // `all`, not `get`: outside a transaction the statement commits as it runs to its end, and a
    // COMMIT refused there (a deferred foreign key) fails only that last step, which `get` does not
    // wait for (the row would answer as written and be gone).
    let inserted: ReadonlyArray<unknown>
    try {
      inserted = statement.all(...valuesOf(table, row))
    } catch (cause) {
      return unavailable(new SqlError({ cause, message: "Failed to execute statement" }))
    }
    // ON CONFLICT DO NOTHING: a refused row returns nothing.
    return inserted.length === 0 ? new DuplicateRow({ table: table.name, id: idOf(row) }) : undefined
  }
  const directOperations: Pick<Driver.Driver, "getNow" | "insertNow" | "transactNow"> = direct === undefined ? {} : {
    getNow: (table, id, fiber) => {
      if (!direct.ready(fiber)) return Driver.NotNow
      const statement = prepared(direct, pointOf(table).get)
      if (statement instanceof StoreUnavailable) return statement
      const row = step(statement, [id])
      if (row === undefined || row instanceof StoreUnavailable) return row
      return mappingOf(table).fromDb(row as Readonly<Record<string, unknown>>)
    },
    insertNow: (table, row, fiber) => direct.ready(fiber) ? insertDirect(direct, table, row) : Driver.NotNow,
    transactNow: SqliteDirectTransaction.make(direct, {
      insert: (table, row) => insertDirect(direct, table, row),
      find: (table, query) => {
        const [source, parameters] = findStatement(table, query).compile()
        // A text listing values (`in`) varies with the list: prepared for this once.
        const keep = !query.where.some((clause) => clause.op === "in" || clause.op === "nin")
        let statement: SqliteDirect.Statement
        try {
          statement = direct.statement(source, keep)
        } catch (cause) {
          return unavailable(new SqlError({ cause, message: "Failed to prepare statement " }))
        }
        try {
          return rowsOf(table)(statement.all(...parameters) as ReadonlyArray<Readonly<Record<string, unknown>>>)
        } catch (cause) {
          return unavailable(new SqlError({ cause, message: "Failed to execute statement" }))
        }
      }
    }, SqlFailure.commitFailure)
  }

  /**
   * On PostgreSQL, statements straight on a connection when that changes nothing (see
   * `PgDirectDriver`); else through the client.
   */
  const pgDirect = dialect === "pg"
    ? yield* PgDirectDriver.make(sql, {
      get: (table) => pointOf(table).get,
      insert: (table) => pointOf(table).insert,
      values: valuesOf,
      fromDb: (table) => mappingOf(table).fromDb
    })
    : undefined
  /** A point statement (text built once per table). */
  const point = <A extends object>(text: string, parameters: ReadonlyArray<unknown>) =>
    pgDirect === undefined ? sql.unsafe<A>(text, parameters) : pgDirect.point<A>(text, parameters)
  /** A built statement, the same way. */
  const run = <A extends object>(statement: Statement.Statement<A>) =>
    pgDirect === undefined ? statement : pgDirect.run(statement)

  /** A one-row insert and its stagers' parts in one statement (see `PgFusedInsert`). */
  const fusedOperations: Pick<Driver.Driver, "insertFusedNow"> = pgDirect === undefined ? {} : {
    insertFusedNow: PgFusedInsert.make(pgDirect, { text: (table) => pointOf(table).insert, values: valuesOf })
  }

  const rowsOf = (table: Table.Any) => (rows: ReadonlyArray<Readonly<Record<string, unknown>>>) => {
    const mapping = mappingOf(table)
    return rows.map(mapping.fromDb)
  }

  /** Which row of a refused multi-row INSERT collided (SQLite does not say; PostgreSQL does). */
  const duplicateIn = (table: Table.Any, error: SqlError, rows: ReadonlyArray<Driver.Encoded>) => {
    const id = SqlFailure.namedDuplicate(error) ?? repeatedId(rows)
    if (id !== undefined || rows.length === 1) return Effect.succeed(new DuplicateRow({ table: table.name, id: id ?? idOf(rows[0]!) }))
    const ids = rows.map(idOf)
    return run(sql<{ readonly id: string }>`SELECT ${sql("id")} FROM ${sql(table.name)} WHERE ${sql.in("id", ids)} LIMIT 1`).pipe(
      Effect.map((found) => new DuplicateRow({ table: table.name, id: found[0]?.id ?? ids[0]! })),
      Effect.orElseSucceed(() => new DuplicateRow({ table: table.name, id: ids[0]! }))
    )
  }

  const insertChunk = (table: Table.Any, rows: ReadonlyArray<Driver.Encoded>) => {
    const mapping = mappingOf(table)
    return run(sql`INSERT INTO ${sql(table.name)} ${sql.insert(rows.map(mapping.toDb))}`).pipe(
      Effect.asVoid,
      Effect.catchAll((error): Effect.Effect<never, DuplicateRow | StoreUnavailable> =>
        SqlFailure.isUniqueViolation(error) ? Effect.flip(duplicateIn(table, error, rows)) : Effect.fail(unavailable(error))
      )
    )
  }

  /**
   * A failed one-row insert. On PostgreSQL outside a transaction the insert commits by itself: a
   * connection failing before its answer may have come after the commit (`autocommitFailure`).
   * Read when the statement has failed, from the fiber's context (its transaction's connection).
   */
  const insertFailure = (error: SqlError) =>
    Effect.map(
      Effect.serviceOption(SqlClient.TransactionConnection),
      (transaction): StoreUnavailable | CommitUnknown =>
        dialect === "pg" && Option.isNone(transaction) ? SqlFailure.autocommitFailure(error) : unavailable(error)
    )

  const driver: Driver.Driver = {
    dialect,
    ...directOperations,
    ...pgDirect?.operations,
    ...fusedOperations,
    insert: (table, rows) => {
      if (rows.length === 1) {
        // ON CONFLICT: a refused row is no SQL error, so an enclosing PostgreSQL transaction stays usable.
        // The statement text is built once per table (no fragment compiled per call).
        const [row] = rows as [Driver.Encoded]
        return point<{ readonly id: string }>(pointOf(table).insert, valuesOf(table, row)).pipe(
          Effect.catchAll((error) => Effect.flip(insertFailure(error))),
          Effect.flatMap((inserted) =>
            inserted.length === 1 ? Effect.void : Effect.fail(new DuplicateRow({ table: table.name, id: idOf(row) }))
          )
        )
      }
      const size = mappingOf(table).rowsPerInsert
      if (rows.length <= size) return insertChunk(table, rows)
      const chunks: Array<ReadonlyArray<Driver.Encoded>> = []
      for (let i = 0; i < rows.length; i += size) chunks.push(rows.slice(i, i + size))
      return Effect.forEach(chunks, (chunk) => insertChunk(table, chunk), { discard: true })
    },
    replace: (table, row) =>
      run(sql`UPDATE ${sql(table.name)} SET ${sql.update(mappingOf(table).toDb(row), ["id"])} WHERE ${sql("id")} = ${
        row.id as string
      }`).pipe(Effect.asVoid, Effect.mapError(unavailable)),
    delete: (table, id) => point(pointOf(table).delete, [id]).pipe(Effect.asVoid, Effect.mapError(unavailable)),
    deleteMany: (table, ids) => {
      const chunks: Array<ReadonlyArray<string>> = []
      for (let i = 0; i < ids.length; i += idsPerDelete) chunks.push(ids.slice(i, i + idsPerDelete))
      return Effect.forEach(
        chunks,
        (chunk) => run(sql`DELETE FROM ${sql(table.name)} WHERE ${sql.in("id", chunk)}`).pipe(Effect.mapError(unavailable)),
        { discard: true }
      )
    },
    get: (table, id, options) => {
      const statements = pointOf(table)
      return point<Record<string, unknown>>(options?.forUpdate ? statements.lock : statements.get, [id]).pipe(
        Effect.map((rows) => rows.length === 0 ? Option.none() : Option.some(mappingOf(table).fromDb(rows[0]!))),
        Effect.mapError(unavailable)
      )
    },
    find: (table, query) =>
      run(findStatement(table, query)).pipe(Effect.map(rowsOf(table)), Effect.mapError(unavailable)),
    count: (table, where) =>
      run(sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM ${sql(table.name)} ${whereOf(mappingOf(table), where)}`).pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0)),
        Effect.mapError(unavailable)
      ),
    page: (table, request) => {
      const mapping = mappingOf(table)
      const where = request.after === null
        ? request.where
        : [...request.where, { field: "id", op: "gt" as const, value: request.after }]
      return run(sql<Record<string, unknown>>`SELECT * FROM ${sql(table.name)} ${whereOf(mapping, where)} ORDER BY ${
        sql("id")
      } ASC LIMIT ${integer(request.limit)}`).pipe(Effect.map(rowsOf(table)), Effect.mapError(unavailable))
    },
    transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.suspend(() => {
        // Set once the body succeeded: a failure after it is the COMMIT's own.
        let committing = false
        const body = Effect.mapError(effect, (error) => new Inner(error)).pipe(Effect.tap(() => {
          committing = true
        }))
        // On PostgreSQL, straight on a reserved connection when that changes nothing (see `PgDirect`);
        // on SQLite, a refused COMMIT rolled back before the connection is released (see `SqliteTransaction`).
        const transacted = pgDirect !== undefined
          ? pgDirect.transaction(body)
          : sqliteClient
          ? SqliteTransaction.run(sql, body)
          : sql.withTransaction(body)
        return transacted.pipe(
          Effect.mapError((error): E | StoreUnavailable => error instanceof Inner ? error.error : unavailable(error)),
          // @effect/sql turns a failed COMMIT or ROLLBACK (a connection lost mid-transaction) into a defect.
          Effect.catchSomeDefect((defect) =>
            defect instanceof SqlError
              ? Option.some(Effect.fail(committing ? SqlFailure.commitFailure(defect) : unavailable(defect)))
              : Option.none()
          )
        )
      })
  }
  return driver
})
