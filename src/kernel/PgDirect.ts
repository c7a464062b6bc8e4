/**
 * Statements run straight on a node-postgres client under an `@effect/sql-pg` client, for the SQL
 * tier's point statements (a read by id, a one-row insert, a delete by id, the change outbox row).
 * Through the client every statement pays a pool checkout and release, a connection scope, a span
 * (also without a tracer: the built-in one), a compile and its error mapping: together about 60 %
 * of a point read's CPU time. Here a statement is one `query` call on a connection.
 *
 * The connection is used only when that changes nothing:
 * - inside a transaction, its own connection (statements of a transaction run on it anyway);
 * - outside one, a connection reserved from the client's pool for this purpose, when it is idle (a
 *   busy one would queue the statement behind another: the pool path runs it at once instead).
 * With a tracer installed, or a statement transformer (`Statement.setTransformer`), statements take
 * the client's path as before, and so they do when the client transforms names (rows then come
 * back exactly as the client returns them). Failures are the client's `SqlError`s, with the same
 * messages; an interrupted statement is cancelled on the server as the client does, except a
 * statement `send` runs: a read by id (it waits for no row lock) or one its caller awaits
 * uninterruptibly, whose fiber simply leaves while the server finishes it.
 *
 * The reserved connection is dropped when it fails (a terminated backend, a lost network path) and
 * reserved again on a later statement; meanwhile statements take the pool path.
 */
import { SqlClient, Statement } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import type { Fiber } from "effect"
import { Context, Effect, ExecutionStrategy, Exit, FiberRef, Option, Predicate, Runtime, Scope } from "effect"
import * as Telemetry from "./Telemetry.js"

/** The part of a node-postgres client used here. */
interface PgConnection {
  readonly processID: number | null
  readonly query: (
    text: string | { readonly name: string; readonly text: string; readonly values: Array<unknown> },
    values: Array<unknown> | undefined,
    callback: (error: Error | null, result: { readonly rows?: ReadonlyArray<unknown> } | ReadonlyArray<unknown>) => void
  ) => void
  readonly on: (event: "error" | "end", listener: () => void) => unknown
  readonly off: (event: "error" | "end", listener: () => void) => unknown
}

const isPgConnection = (value: unknown): value is PgConnection =>
  Predicate.hasProperty(value, "query") && typeof value.query === "function" && Predicate.hasProperty(value, "on") &&
  typeof value.on === "function"

/** The node-postgres client behind an `@effect/sql-pg` connection (its `pg` field), if it has one. */
const pgOf = (connection: Connection): PgConnection | undefined => {
  const pg = Predicate.hasProperty(connection, "pg") ? connection.pg : undefined
  return isPgConnection(pg) ? pg : undefined
}

const pgClientTypeId = "~@effect/sql-pg/PgClient"

interface PgClientLike {
  readonly config?: {
    readonly transformResultNames?: unknown
    readonly transformQueryNames?: unknown
  }
}

/** Direct statements on one client's connections. */
export interface Direct {
  /**
   * `text` with `parameters` as an effect that runs it on a connection directly, when that changes
   * nothing for `fiber` (see the module doc); `undefined` when the statement must go through the client.
   */
  readonly now: <A>(
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    text: string,
    parameters: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<A>, SqlError> | undefined
  /**
   * `text` sent now, when `now` would run it directly, on the connection chosen and taken in this
   * call; `answer` is called once, from node-postgres's callback, with the failure or the rows (and
   * `context`). `false`: the statement must go through the client; nothing was sent. No effect
   * per statement: for a caller inside its own `Effect.async` (the store's point read and one-row
   * insert), whose fiber resumes from `answer` with its final outcome. For statements whose
   * interruption needs no cancellation on the server: a read without locks (under MVCC it waits
   * for nothing but a table's exclusive lock), or a statement the caller awaits uninterruptibly.
   * An interrupted caller leaves at once; the connection stays busy until the server's answer
   * arrives (the pool path serves meanwhile). `answer` must not throw.
   */
  readonly send: <C>(
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    text: string,
    parameters: ReadonlyArray<unknown>,
    answer: (error: SqlError | undefined, rows: ReadonlyArray<Record<string, unknown>>, context: C) => void,
    context: C
  ) => boolean
  /** A statement of the client's, compiled and run directly when `now` would, else through the client. */
  readonly statement: <A extends object>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /** `text` directly when `now` allows it, else `fallback` (the same statement through the client). */
  readonly run: <A>(
    text: string,
    parameters: ReadonlyArray<unknown>,
    fallback: Effect.Effect<ReadonlyArray<A>, SqlError>
  ) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /**
   * `body` in a transaction on the idle reserved connection, BEGIN and COMMIT sent on it directly,
   * the connection provided as the `TransactionConnection` (statements, stagers and savepoints run
   * on it), when `now` would run directly and no transaction is open; else `fallback` (the client's
   * `withTransaction`). As there: a failed COMMIT or ROLLBACK is a defect (its `SqlError`), and
   * only `body` is interruptible.
   */
  readonly transaction: <A, E, R>(
    body: Effect.Effect<A, E, R>,
    fallback: Effect.Effect<A, E | SqlError, R>
  ) => Effect.Effect<A, E | SqlError, R>
}

/** A query's rows; a multi-statement text answers one result per statement, as through the client. */
const rowsOf = (result: { readonly rows?: ReadonlyArray<unknown> } | ReadonlyArray<unknown>): ReadonlyArray<unknown> =>
  Array.isArray(result)
    ? result.map((r: { readonly rows?: ReadonlyArray<unknown> }) => r.rows ?? [])
    : (result as { readonly rows?: ReadonlyArray<unknown> }).rows ?? []

const noRows: ReadonlyArray<Record<string, unknown>> = []

/** node-postgres's answer handed to a `send` caller. */
const answered = <C>(
  error: Error | null,
  result: { readonly rows?: ReadonlyArray<unknown> } | ReadonlyArray<unknown>,
  answer: (error: SqlError | undefined, rows: ReadonlyArray<Record<string, unknown>>, context: C) => void,
  context: C
) =>
  error
    ? answer(new SqlError({ cause: error, message: "Failed to execute statement" }), noRows, context)
    : answer(undefined, rowsOf(result) as ReadonlyArray<Record<string, unknown>>, context)

/**
 * Texts sent as named prepared statements (parsed and planned once per connection, then only bound
 * and run), with their names. For long statements a caller sends many times with the same text,
 * whose planning costs more than running them: the one-statement staged insert (`FusedStage`), whose
 * data-modifying CTE took ~440 µs of server time unnamed against ~220 µs prepared. Their results'
 * shape never changes with the tables' columns (they return ids or JSON), so a table altered
 * later only makes the server plan them again.
 */
const preparedNames = new Map<string, string>()

/**
 * Sends `text` as a named prepared statement on the direct path from now on (see `preparedNames`):
 * only for texts built once and sent many times, never for one made per call (each name lives on
 * every connection that ran it, until the connection closes).
 */
export const prepare = (text: string): void => {
  if (!preparedNames.has(text)) preparedNames.set(text, `fw_prepared_${preparedNames.size + 1}`)
}

/** One reserved connection and how to give it back. */
class Slot {
  busy = false
  dead = false
  constructor(readonly connection: Connection, readonly pg: PgConnection, readonly scope: Scope.CloseableScope) {}
}

/** After a failed reservation, the next attempt waits this long (the database may be away). */
const retryReserveMs = 1_000
/** How long the cancellation of an interrupted statement may take (as the client's). */
const cancelTimeoutMs = 5_000

/**
 * Direct statements for `sql` when it is an `@effect/sql-pg` client without name transforms whose
 * connections expose their node-postgres client; otherwise `undefined`, and every statement goes
 * through the client. The reserved connection lives as long as the scope.
 */
export const make = (
  sql: SqlClient.SqlClient,
  options: {
    /** `false`: only statements inside transactions run directly; none reserves a connection. */
    readonly reserve?: boolean
  } = {}
): Effect.Effect<Direct | undefined, never, Scope.Scope> =>
  Effect.gen(function*() {
    if (!(pgClientTypeId in sql)) return undefined
    const config = (sql as PgClientLike).config
    if (config?.transformResultNames !== undefined || config?.transformQueryNames !== undefined) return undefined
    const scope = yield* Effect.scope
    const runtime = yield* Effect.runtime<never>()
    let slot: Slot | undefined
    let reserving = false
    let closed = false
    let nextReserveAt = 0
    yield* Scope.addFinalizer(scope, Effect.sync(() => {
      closed = true
    }))

    const drop = (dead: Slot) => {
      if (dead.dead) return
      dead.dead = true
      if (slot === dead) slot = undefined
      dead.pg.off("error", onFailure)
      dead.pg.off("end", onFailure)
      // Closing the reservation's scope gives the connection back to the pool, which discards a failed one.
      Runtime.runFork(runtime)(Scope.close(dead.scope, Exit.void))
    }
    const onFailure = () => {
      if (slot !== undefined) drop(slot)
    }

    /** Reserves a connection in the background; statements take the pool path meanwhile. */
    const reserve = Effect.gen(function*() {
      const own = yield* Scope.fork(scope, ExecutionStrategy.sequential)
      const connection = yield* Scope.extend(sql.reserve, own).pipe(
        Effect.tapError(() => Scope.close(own, Exit.void))
      )
      const pg = pgOf(connection)
      if (pg === undefined || closed) return yield* Scope.close(own, Exit.void)
      slot = new Slot(connection, pg, own)
      pg.on("error", onFailure)
      pg.on("end", onFailure)
    }).pipe(
      Effect.catchAllCause(() =>
        Effect.sync(() => {
          nextReserveAt = Date.now() + retryReserveMs
        })
      ),
      Effect.ensuring(Effect.sync(() => {
        reserving = false
      }))
    )

    if (options.reserve === false) {
      // Never reserved: statements outside transactions take the client's path.
      closed = true
    } else {
      // Reserved now, so the first statements need not wait for it.
      reserving = true
      yield* reserve
    }

    /** The idle reserved connection, if any; starts a reservation when there is none. */
    const idle = (): Slot | undefined => {
      if (slot !== undefined) return slot.busy ? undefined : slot
      if (!reserving && !closed && Date.now() >= nextReserveAt) {
        reserving = true
        Runtime.runFork(runtime)(reserve)
      }
      return undefined
    }

    /**
     * Cancels the statement running on `pg` (best effort, as the client does), from a pool
     * connection: never from the transaction's own, which is the one busy with the statement.
     */
    const cancel = (pg: PgConnection) =>
      pg.processID === null ? Effect.void : sql.unsafe(`SELECT pg_cancel_backend(${pg.processID})`).pipe(
        Effect.locallyWith(FiberRef.currentContext, Context.omit(SqlClient.TransactionConnection)),
        Effect.ignore,
        Effect.timeoutOption(cancelTimeoutMs),
        Effect.asVoid
      )

    const execute = <A>(pg: PgConnection, text: string, parameters: ReadonlyArray<unknown>, own: Slot | undefined) =>
      Effect.async<ReadonlyArray<A>, SqlError>((resume) => {
        if (own !== undefined && (own.busy || own.dead)) {
          // The reserved connection was idle when this statement was made, but the effect runs
          // later (the fiber may have yielded meanwhile): a transaction may hold it now, or it
          // died. The statement must not join that transaction: it takes the pool path.
          resume(Effect.map(sql.unsafe(text, parameters), (rows) => rows as ReadonlyArray<unknown> as ReadonlyArray<A>))
          return
        }
        let pending = true
        if (own !== undefined) own.busy = true
        const name = preparedNames.get(text)
        const query = name === undefined ? text : { name, text, values: parameters as Array<unknown> }
        pg.query(query, parameters as Array<unknown>, (error, result) => {
          pending = false
          if (own !== undefined) own.busy = false
          if (error) {
            resume(Effect.fail(new SqlError({ cause: error, message: "Failed to execute statement" })))
          } else {
            resume(Effect.succeed(rowsOf(result) as ReadonlyArray<A>))
          }
        })
        return Effect.suspend(() => pending ? cancel(pg) : Effect.void)
      })

    /** See `Direct.send`. */
    const send = <C>(
      fiber: Fiber.RuntimeFiber<unknown, unknown>,
      text: string,
      parameters: ReadonlyArray<unknown>,
      answer: (error: SqlError | undefined, rows: ReadonlyArray<Record<string, unknown>>, context: C) => void,
      context: C
    ): boolean => {
      const on = connectionFor(fiber)
      if (on === undefined) return false
      if (on instanceof Slot) {
        on.busy = true
        on.pg.query(text, parameters as Array<unknown>, (error, result) => {
          on.busy = false
          answered(error, result, answer, context)
        })
      } else {
        on.query(text, parameters as Array<unknown>, (error, result) => answered(error, result, answer, context))
      }
      return true
    }

    /** Whether a statement of `fiber` may bypass the client (no tracer, no statement transformer). */
    const bypasses = (fiber: Fiber.RuntimeFiber<unknown, unknown>) =>
      !Telemetry.isInstalled(fiber.currentTracer) && Option.isNone(fiber.getFiberRef(Statement.currentTransformer))

    /** The connection a statement of `fiber` runs on directly: its transaction's, or the idle reserved one. */
    const connectionFor = (fiber: Fiber.RuntimeFiber<unknown, unknown>): PgConnection | Slot | undefined => {
      if (!bypasses(fiber)) return undefined
      const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
      return Option.isSome(transaction) ? pgOf(transaction.value[0]) : idle()
    }

    const now = <A>(fiber: Fiber.RuntimeFiber<unknown, unknown>, text: string, parameters: ReadonlyArray<unknown>) => {
      const on = connectionFor(fiber)
      if (on === undefined) return undefined
      return on instanceof Slot ? execute<A>(on.pg, text, parameters, on) : execute<A>(on, text, parameters, undefined)
    }

    /**
     * Without the client's `withTransaction` a short write transaction skips a pool checkout, a
     * scope, a span and their bookkeeping: the reserved connection is held (busy) from BEGIN to
     * COMMIT, so point statements of other fibers take the pool path meanwhile.
     */
    const transaction = <A, E, R>(body: Effect.Effect<A, E, R>, fallback: Effect.Effect<A, E | SqlError, R>) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.withFiberRuntime<A, E | SqlError, R>((fiber) => {
          const context = fiber.currentContext
          const own = bypasses(fiber) && Option.isNone(Context.getOption(context, SqlClient.TransactionConnection))
            ? idle()
            : undefined
          if (own === undefined) return restore(fallback)
          own.busy = true
          const inside = Context.add(context, SqlClient.TransactionConnection, [own.connection, 0] as const)
          return execute<never>(own.pg, "BEGIN", [], undefined).pipe(
            Effect.zipRight(Effect.locally(restore(body), FiberRef.currentContext, inside)),
            Effect.exit,
            Effect.flatMap((exit) =>
              Effect.zipRight(
                Effect.orDie(execute<never>(own.pg, Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK", [], undefined)),
                exit
              )
            ),
            Effect.ensuring(Effect.sync(() => {
              own.busy = false
            }))
          )
        })
      )

    return {
      now,
      send,
      transaction,
      statement: <A extends object>(statement: Statement.Statement<A>) =>
        Effect.withFiberRuntime<ReadonlyArray<A>, SqlError>((fiber) => {
          const on = connectionFor(fiber)
          if (on === undefined) return statement
          const [text, parameters] = statement.compile()
          return on instanceof Slot ? execute<A>(on.pg, text, parameters, on) : execute<A>(on, text, parameters, undefined)
        }),
      run: <A>(text: string, parameters: ReadonlyArray<unknown>, fallback: Effect.Effect<ReadonlyArray<A>, SqlError>) =>
        Effect.withFiberRuntime<ReadonlyArray<A>, SqlError>((fiber) => now<A>(fiber, text, parameters) ?? fallback)
    } satisfies Direct
  })
