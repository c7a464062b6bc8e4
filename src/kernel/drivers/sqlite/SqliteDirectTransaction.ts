/**
 * SQLite's `Driver.transactNow`: a short transaction — BEGIN, a few statements, COMMIT — run on
 * the better-sqlite3 handle within one synchronous step (see `SqliteDirect`). Through the client, a
 * transaction takes its semaphore and connection scope and runs BEGIN and COMMIT as effects: about
 * five times the cost of the one-row insert it wraps. Within one step no other fiber's statement can
 * come between BEGIN and COMMIT, so it is taken only where `SqliteDirect.ready` allows a statement
 * outside a transaction: the caller is in no transaction of its own and no other fiber's is open.
 * When BEGIN cannot run, nothing has happened and the caller takes the client's path.
 */
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { Context, Either, Option } from "effect"
import * as Driver from "../../store/Driver.js"
import type { CommitUnknown, StoreUnavailable } from "../../Errors.js"
import type * as SqliteDirect from "./SqliteDirect.js"

/**
 * `transactNow` on `direct`, with `now` as the body's statements. `commitFailure` says what a failed
 * COMMIT means, as the client's transaction reports it.
 */
export const make = (
  direct: SqliteDirect.Direct,
  now: Driver.Now,
  commitFailure: (error: SqlError) => StoreUnavailable | CommitUnknown
): NonNullable<Driver.Driver["transactNow"]> => {
  const rollback = () => {
    try {
      direct.statement("ROLLBACK").run()
    } catch {
      // No transaction left to roll back (SQLite ended it on the failure): nothing to undo.
    }
  }
  return (fiber, body) => {
    if (Option.isSome(Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)) || !direct.ready(fiber)) {
      return Driver.NotNow
    }
    try {
      direct.statement("BEGIN").run()
    } catch {
      // Nothing was begun: the client's transaction runs it, and reports what is wrong.
      return Driver.NotNow
    }
    let result
    try {
      result = body(now)
    } catch (defect) {
      rollback()
      throw defect
    }
    if (Either.isLeft(result)) {
      rollback()
      return result
    }
    try {
      direct.statement("COMMIT").run()
    } catch (cause) {
      // A refused COMMIT (a deferred foreign key, SQLITE_BUSY) leaves the transaction open: ended
      // here, so nothing of it commits later with another statement. The message is the one the
      // client's COMMIT fails with, so both paths answer alike.
      rollback()
      return Either.left(commitFailure(new SqlError({ cause, message: "Failed to execute statement" })))
    }
    return result
  }
}
