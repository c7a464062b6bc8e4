/**
 * The store's transaction through an `@effect/sql-sqlite-node` client, ending a refused COMMIT.
 *
 * SQLite leaves the transaction open when it refuses a COMMIT (a deferred foreign key still
 * violated, `SQLITE_BUSY`): the COMMIT can be retried or the transaction rolled back. The client's
 * `withTransaction` makes the failed COMMIT a defect and releases its one connection with the
 * transaction still open; every later statement of any fiber then runs inside it, and the next
 * BEGIN fails. Here the outermost transaction is run as the client runs it (its connection held
 * from BEGIN to the end, `SqlClient.TransactionConnection` set for the body, the `sql.transaction`
 * span when a tracer is installed), but a failed COMMIT is followed by ROLLBACK before the
 * connection is released. Nested calls are the client's savepoints.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Exit, FiberRef, Option, Scope } from "effect"
import * as Telemetry from "../../Telemetry.js"

const sqliteClientTypeId = Symbol.for("@effect/sql-sqlite-node/SqliteClient")

/** Whether `sql` is an `@effect/sql-sqlite-node` client (one connection, held by `reserve` until its scope ends). */
export const applies = (sql: SqlClient.SqlClient): boolean => sqliteClientTypeId in sql

/**
 * `body` in a transaction on `sql` (see the module doc). As with the client's `withTransaction`,
 * a failed BEGIN is the effect's `SqlError` and a failed COMMIT or ROLLBACK a defect (its
 * `SqlError`); after a failed COMMIT nothing of the transaction is left open.
 */
export const run = <A, E, R>(sql: SqlClient.SqlClient, body: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime<A, E | SqlError, R>((fiber) => {
      if (Option.isSome(Context.getOption(fiber.currentContext, SqlClient.TransactionConnection))) {
        return restore(sql.withTransaction(body))
      }
      // The body's context is read inside the span (its parent span) and outside the connection's
      // scope (which is not the body's to extend).
      const transaction = Effect.withFiberRuntime<A, E | SqlError, R>((inner) =>
        Effect.flatMap(Scope.make(), (scope) =>
          Scope.extend(sql.reserve, scope).pipe(
            Effect.flatMap((connection) => {
              const inside = Context.add(inner.currentContext, SqlClient.TransactionConnection, [connection, 0] as const)
              const statement = (text: string) => connection.executeUnprepared(text, [], undefined)
              return statement("BEGIN").pipe(
                Effect.zipRight(Effect.exit(Effect.locally(restore(body), FiberRef.currentContext, inside))),
                Effect.flatMap((exit) => {
                  if (Exit.isFailure(exit)) return Effect.zipRight(Effect.orDie(statement("ROLLBACK")), exit)
                  return Effect.zipRight(
                    statement("COMMIT").pipe(
                      // Refused: the transaction is still open (or SQLite ended it: ROLLBACK then has nothing to do).
                      Effect.tapError(() => Effect.ignore(statement("ROLLBACK"))),
                      Effect.orDie
                    ),
                    exit
                  )
                })
              )
            }),
            Effect.onExit((exit) => Scope.close(scope, exit))
          ))
      )
      return Telemetry.isInstalled(fiber.currentTracer)
        ? Effect.withSpan(transaction, "sql.transaction", {
          kind: "client",
          captureStackTrace: false,
          attributes: { "db.system.name": "sqlite" }
        })
        : transaction
    })
  )
