/**
 * The SQL tier's statements on PostgreSQL through `PgDirect`: point statements, built statements
 * and transactions straight on a connection when that changes nothing, else through the client;
 * and the store's single operations (`getSend`, `insertSend`) straight on a connection, so the
 * store waits for the server and nothing else.
 */
import { SqlClient } from "@effect/sql"
import type { Statement } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Scope } from "effect"
import { Context, Effect } from "effect"
import * as Columns from "../../schema/Columns.js"
import * as Driver from "../../store/Driver.js"
import { DuplicateRow } from "../../Errors.js"
import type { StoreUnavailable } from "../../Errors.js"
import * as PgDirect from "./PgDirect.js"
import * as RowCodec from "../../schema/RowCodec.js"
import { autocommitFailure, unavailable } from "../sql/SqlFailure.js"
import type * as Table from "../../schema/Table.js"

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
  /** See `PgDirect.Direct`. */
  readonly send: PgDirect.Direct["send"]
  readonly reserved: PgDirect.Direct["reserved"]
  /** A built statement, the same way. */
  readonly run: <A extends object>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /** `body` in a transaction on an idle reserved connection (see `PgDirect`), else the client's. */
  readonly transaction: <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
  /** The store's single operations, sent straight on a connection. */
  readonly operations: Pick<Driver.Driver, "getSend" | "insertSend">
}

const idOf = (row: Driver.Encoded) => row.id as string

/** The JavaScript type node-postgres reads each plain column kind as (text, double precision, boolean). */
const plainTypes: Partial<Record<Columns.Kind, string>> = { text: "string", number: "number", boolean: "boolean" }

/**
 * Whether a row of `table` read by id may be handed to the store as node-postgres built it: every
 * column plain, each value already in its encoded form (or a null where the encoded row holds
 * null). Such a row decodes exactly as its mapped copy would (the store's point read only checks
 * its id and tenant and decodes it; undeclared columns are ignored there): one object fewer per
 * read. Anything else (JSON, a numeric read back as text, an absent optional field) is mapped.
 */
const storedAsIs = (table: Table.Any): (row: Readonly<Record<string, unknown>>) => boolean => {
  const columns = Columns.of(table)
  if (!columns.every((column) => plainTypes[column.kind] !== undefined)) return () => false
  const names = columns.map((column) => column.name)
  const types = columns.map((column) => plainTypes[column.kind]!)
  const nullable = columns.map((column) => !column.optional || column.nullable)
  return (row) => {
    for (let i = 0; i < names.length; i++) {
      const value = row[names[i]!]
      if (value === null ? !nullable[i] : typeof value !== types[i]) return false
    }
    return true
  }
}

/**
 * The direct wiring over `sql` (a PostgreSQL client); `undefined` when `PgDirect` cannot run
 * statements on it (every statement then goes through the client). Reserves connections for the
 * lifetime of the scope (see `PgDirectSlots`).
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

    /**
     * What a point statement on a table needs, built once per table: functions made per call
     * would cost an allocation each (and a rename each under esbuild's keepNames, as tsx runs).
     */
    interface TablePoints {
      readonly get: string
      readonly insert: string
      /** The read by id's answer handed to the store's `answer` (`getSend`). */
      readonly got: (
        error: SqlError | undefined,
        rows: ReadonlyArray<Record<string, unknown>>,
        answer: (row: Driver.Encoded | undefined | StoreUnavailable) => void
      ) => void
      /** ON CONFLICT DO NOTHING: a refused row returns nothing (and leaves a transaction usable). */
      readonly refused: (written: ReadonlyArray<unknown>, id: string) => DuplicateRow | undefined
    }
    const tables = new WeakMap<Table.Any, TablePoints>()
    const pointsOf = (table: Table.Any): TablePoints => {
      let found = tables.get(table)
      if (found === undefined) {
        const fromDb = points.fromDb(table)
        const name = table.name
        const stored = storedAsIs(table)
        found = {
          get: points.get(table),
          insert: points.insert(table),
          got: (error, rows, answer) =>
            answer(
              error !== undefined
                ? unavailable(error)
                : rows.length === 0
                ? undefined
                : stored(rows[0]!)
                ? rows[0]!
                : fromDb(rows[0]!)
            ),
          refused: (written, id) => written.length === 1 ? undefined : new DuplicateRow({ table: name, id })
        }
        tables.set(table, found)
      }
      return found
    }
    // The reads wait for no row lock and the store awaits an insert's answer uninterruptibly (a
    // written row is announced): neither needs a cancellation on interruption (`PgDirect.send`).
    const operations: Pick<Driver.Driver, "getSend" | "insertSend"> = {
      getSend: (table, id, fiber, answer) => {
        // PostgreSQL refuses text holding NUL or a lone surrogate: no row has such an id.
        if (!RowCodec.isStorableId(id)) {
          answer(undefined)
          return true
        }
        const statements = pointsOf(table)
        return pgDirect.send(fiber, statements.get, [id], statements.got, answer)
      },
      insertSend: (table, row, fiber, answer) => {
        const statements = pointsOf(table)
        // Outside a transaction the insert commits by itself: a connection failing before its answer
        // may have come after the commit (`autocommitFailure`). Inside one, nothing commits without its COMMIT.
        const failure = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)._tag === "None"
          ? autocommitFailure
          : unavailable
        return pgDirect.send(
          fiber,
          statements.insert,
          points.values(table, row),
          (error, written) => answer(error !== undefined ? failure(error) : statements.refused(written, idOf(row))),
          undefined
        )
      }
    }

    return {
      point,
      send: pgDirect.send,
      reserved: pgDirect.reserved,
      run: (statement) => pgDirect.statement(statement),
      transaction: (body) => pgDirect.transaction(body, sql.withTransaction(body)),
      operations
    } satisfies PgDirectDriver
  })
