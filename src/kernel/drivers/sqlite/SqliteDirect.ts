/**
 * Statements run straight on the better-sqlite3 handle under an `@effect/sql-sqlite-node` client,
 * for the SQL tier's single-row operations. better-sqlite3 is synchronous, so a point read or a
 * one-row insert can be done within one fiber step, with a prepared statement kept per SQL text:
 * no connection scope, semaphore, prepare-cache lookup or span per statement (together about nine
 * tenths of a point read's time through the client).
 *
 * The client keeps its one connection behind a semaphore that a transaction holds until it ends.
 * The handle is used only when that changes nothing: inside the caller's own transaction (the
 * connection is the caller's), or outside any transaction while no other fiber's is open (a
 * statement then runs atomically between transactions, as the client would run it). Otherwise
 * the caller takes the client's path and waits its turn.
 */
import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import type { Fiber } from "effect"
import { Context, Effect, Option } from "effect"

/** The part of a better-sqlite3 statement used here. */
export interface Statement {
  readonly get: (...parameters: ReadonlyArray<unknown>) => unknown
  readonly all: (...parameters: ReadonlyArray<unknown>) => ReadonlyArray<unknown>
  readonly run: (...parameters: ReadonlyArray<unknown>) => unknown
}

/** The part of a better-sqlite3 database handle used here. */
interface Handle {
  readonly open: boolean
  readonly inTransaction: boolean
  readonly prepare: (source: string) => Statement
}

/** Direct statements on one client's handle. */
export interface Direct {
  /** Whether `fiber` may run a statement on the handle now, synchronously (see the module doc). */
  readonly ready: (fiber: Fiber.RuntimeFiber<unknown, unknown>) => boolean
  /**
   * The prepared statement for `source`, prepared once per handle (`keep: false`: prepared afresh
   * and not kept, for texts that vary, such as lists of values). Throws what `prepare` throws.
   */
  readonly statement: (source: string, keep?: boolean) => Statement
}

const sqliteClientTypeId = Symbol.for("@effect/sql-sqlite-node/SqliteClient")

interface SqliteClientLike {
  readonly config?: {
    readonly transformResultNames?: unknown
    readonly transformQueryNames?: unknown
  }
}

interface DatabaseClass {
  readonly prototype: { prepare: (this: Handle, source: string) => Statement }
}

/**
 * The handle behind `connection`, caught as the connection prepares a statement: the client does
 * not expose it. `prepare` is wrapped only for that one synchronous call. `undefined` when the
 * connection prepared nothing on the spot or used another copy of better-sqlite3.
 */
const handleOf = (database: DatabaseClass, connection: Connection): Handle | undefined => {
  const prototype = database.prototype
  const prepare = prototype.prepare
  let seen: Handle | undefined
  prototype.prepare = function(source) {
    seen = this
    return prepare.call(this, source)
  }
  try {
    // Building the effect prepares the statement; it is never run.
    connection.executeUnprepared("SELECT 1", [], undefined)
  } catch {
    seen = undefined
  } finally {
    prototype.prepare = prepare
  }
  return seen
}

/**
 * Direct statements for `sql` when it is an `@effect/sql-sqlite-node` client without name
 * transforms (rows then come back exactly as the client returns them) and its handle can be
 * reached; otherwise `undefined`, and every statement goes through the client.
 */
export const make = (sql: SqlClient.SqlClient): Effect.Effect<Direct | undefined> =>
  Effect.gen(function*() {
    if (!(sqliteClientTypeId in sql)) return undefined
    const config = (sql as SqliteClientLike).config
    if (config?.transformResultNames !== undefined || config?.transformQueryNames !== undefined) return undefined
    const database = yield* Effect.promise(() =>
      import("better-sqlite3").then((module) => module.default as unknown as DatabaseClass, () => undefined)
    )
    if (database === undefined) return undefined
    const handle = yield* Effect.scoped(Effect.map(sql.reserve, (connection) => handleOf(database, connection))).pipe(
      Effect.orElseSucceed(() => undefined)
    )
    if (handle === undefined) return undefined
    const statements = new Map<string, Statement>()
    return {
      ready: (fiber) => {
        if (!handle.open) return false
        const inTransaction = Option.isSome(Context.getOption(fiber.currentContext, SqlClient.TransactionConnection))
        return inTransaction ? handle.inTransaction : !handle.inTransaction
      },
      statement: (source, keep = true) => {
        if (!keep) return handle.prepare(source)
        let statement = statements.get(source)
        if (statement === undefined) {
          statement = handle.prepare(source)
          statements.set(source, statement)
        }
        return statement
      }
    } satisfies Direct
  })
