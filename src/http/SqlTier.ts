/**
 * What the HTTP layer's own record stores (idempotency, rate limits) share: choosing the tier that
 * matches the app's store, and sweeping expired rows from their SQL table.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Layer, Option, Schedule } from "effect"
import { Store } from "../kernel/store/Store.js"

const sweepInterval = "10 minutes"

/** Deletes the rows of `table` whose `column` (epoch millis) has passed, every ten minutes, in the background. */
export const sweepExpired = (table: string, column: string, label: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      yield* sql`DELETE FROM ${sql(table)} WHERE ${sql(column)} <= ${now}`
    }).pipe(
      Effect.catchAll((error) => Effect.logWarning(`${label} sweep failed`, error)),
      Effect.repeat(Schedule.spaced(sweepInterval)),
      Effect.delay(sweepInterval),
      Effect.forkScoped
    )
  })

/**
 * The tier matching the app's store: `memory` for the memory store, `sql` over the `SqlClient` in
 * context for a SQL store; dies with `missing()` when a SQL store has no `SqlClient` in context.
 */
export const fromStore = <I, E>(
  memory: Layer.Layer<I, E>,
  sql: Layer.Layer<I, E, SqlClient.SqlClient>,
  missing: () => unknown
): Layer.Layer<I, E, Store> =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const store = yield* Store
      if (store.dialect === "memory") return memory
      const client = yield* Effect.serviceOption(SqlClient.SqlClient)
      if (Option.isNone(client)) return yield* Effect.die(missing())
      return sql.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, client.value)))
    })
  )
