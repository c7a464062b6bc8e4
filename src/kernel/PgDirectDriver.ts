/**
 * The SQL tier's statements on PostgreSQL through `PgDirect`: point statements, built statements
 * and transactions straight on a connection when that changes nothing, else through the client;
 * and the store's single operations (`getNow`, `insertNow`) as effects on a connection, so the
 * store waits for the server and nothing else.
 */
import type { SqlClient, Statement } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Scope } from "effect"
import { Effect } from "effect"
import * as Driver from "./Driver.js"
import { DuplicateRow } from "./Errors.js"
import * as PgDirect from "./PgDirect.js"
import * as RowCodec from "./RowCodec.js"
import { unavailable } from "./SqlFailure.js"
import type * as Table from "./Table.js"

/** What the SQL driver knows of a table's point statements (texts built once per table). */
export interface Points {
  /** The read by id (`$1`). */
  readonly get: (table: Table.Any) => string
  /** The one-row insert; a refused duplicate id returns no row (`ON CONFLICT DO NOTHING RETURNING "id"`). */
  readonly insert: (table: Table.Any) => string
  /** The parameters of `insert` for `row`, in column order. */
  readonly values: (table: Table.Any, row: Driver.Encoded) => Array<unknown>
  /** How a database row of the table reads back to its encoded form. */
  readonly fromDb: (table: Table.Any) => (row: Readonly<Record<string, unknown>>) => Driver.Encoded
}

/** The SQL driver's statements on a PostgreSQL client, direct where `PgDirect` allows. */
export interface PgDirectDriver {
  /** A point statement (text built once per table), directly when that changes nothing, else through the client. */
  readonly point: <A extends object>(text: string, parameters: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /** A built statement, the same way. */
  readonly run: <A extends object>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /** `body` in a transaction on the reserved connection when free (see `PgDirect`), else the client's. */
  readonly transaction: <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
  /** The store's single operations as effects straight on a connection. */
  readonly operations: Pick<Driver.Driver, "getNow" | "insertNow">
}

const idOf = (row: Driver.Encoded) => row.id as string

/**
 * The direct wiring over `sql` (a PostgreSQL client); `undefined` when `PgDirect` cannot run
 * statements on it (every statement then goes through the client). Reserves a connection for the
 * lifetime of the scope.
 */
export const make = (
  sql: SqlClient.SqlClient,
  points: Points
): Effect.Effect<PgDirectDriver | undefined, never, Scope.Scope> =>
  Effect.gen(function*() {
    const pgDirect = yield* PgDirect.make(sql)
    if (pgDirect === undefined) return undefined

    const point = <A extends object>(text: string, parameters: ReadonlyArray<unknown>) =>
      pgDirect.run<A>(text, parameters, sql.unsafe<A>(text, parameters))

    // Built once per table or call, outside the object literal below: a function defined as a
    // property there is renamed per call when the source runs through esbuild's keepNames (tsx).
    const firstRows = new WeakMap<Table.Any, (rows: ReadonlyArray<Record<string, unknown>>) => Driver.Encoded | undefined>()
    const firstOf = (table: Table.Any) => {
      let first = firstRows.get(table)
      if (first === undefined) {
        const fromDb = points.fromDb(table)
        first = (rows) => rows.length === 0 ? undefined : fromDb(rows[0]!)
        firstRows.set(table, first)
      }
      return first
    }
    const refusedIf = (table: Table.Any, row: Driver.Encoded) => (written: ReadonlyArray<unknown>) =>
      written.length === 1 ? undefined : new DuplicateRow({ table: table.name, id: idOf(row) })
    const operations: Pick<Driver.Driver, "getNow" | "insertNow"> = {
      getNow: (table, id, fiber) => {
        // PostgreSQL refuses text holding NUL or a lone surrogate: no row has such an id.
        if (!RowCodec.isStorableId(id)) return undefined
        const rows = pgDirect.now<Record<string, unknown>>(fiber, points.get(table), [id])
        if (rows === undefined) return Driver.NotNow
        return new Driver.Later(Effect.mapBoth(rows, { onFailure: unavailable, onSuccess: firstOf(table) }))
      },
      insertNow: (table, row, fiber) => {
        const inserted = pgDirect.now<{ readonly id: string }>(fiber, points.insert(table), points.values(table, row))
        if (inserted === undefined) return Driver.NotNow
        // ON CONFLICT DO NOTHING: a refused row returns nothing (and leaves a transaction usable).
        return new Driver.Later(Effect.mapBoth(inserted, { onFailure: unavailable, onSuccess: refusedIf(table, row) }))
      }
    }

    return {
      point,
      run: (statement) => pgDirect.statement(statement),
      transaction: (body) => pgDirect.transaction(body, sql.withTransaction(body)),
      operations
    } satisfies PgDirectDriver
  })
