/**
 * Statements run straight on a node-postgres client under an `@effect/sql-pg` client, for the SQL
 * tier's point statements (a read by id, a one-row insert, a delete by id, the change outbox row).
 * Through the client every statement pays a pool checkout and release, a connection scope, a span
 * (also without a tracer: the built-in one), a compile and its error mapping: together about 60 %
 * of a point read's CPU time. Here a statement is one `query` call on a connection.
 *
 * The connection is used only when that changes nothing:
 * - inside a transaction, its own connection (statements of a transaction run on it anyway);
 * - outside one, one of the connections reserved from the client's pool for this purpose (see
 *   `PgDirectSlots`): an idle one, taken in the same call, else the first given back, as a pool
 *   serves its waiters; the client's pool path when none will be given back without another
 *   fiber's help (each held by a transaction).
 * With a tracer installed, or a statement transformer (`Statement.setTransformer`), statements take
 * the client's path as before, and so they do when the client transforms names (rows then come
 * back exactly as the client returns them). Failures are the client's `SqlError`s, with the same
 * messages; an interrupted statement is cancelled on the server as the client does, except a
 * statement `send` runs: a read by id (it waits for no row lock) or one its caller awaits
 * uninterruptibly, whose fiber simply leaves while the server finishes it.
 *
 * A reserved connection is dropped when it fails (a terminated backend, a lost network path) and
 * another reserved when a statement needs one; meanwhile the others serve. A statement that meets
 * the failure first (the server's FATAL, before node-postgres reports the connection ended) drops
 * it too, so no later statement is sent on it.
 */
import { SqlClient, Statement } from "@effect/sql"
// Type only: `@effect/sql-pg` and `pg` are optional peers, present whenever a PgClient is.
import type { PgClient } from "@effect/sql-pg"
import type * as PgDriver from "pg"
import { SqlError } from "@effect/sql/SqlError"
import type { Fiber, Scope } from "effect"
import { Cause, Context, Effect, Exit, FiberRef, Option, Predicate, Runtime } from "effect"
import * as ListenWatchdog from "./ListenWatchdog.js"
import { connectionLost } from "./PgConnectionLost.js"
import * as Slots from "./PgDirectSlots.js"
import type { PgConnection } from "./PgDirectSlots.js"
import { pgOf } from "./PgDirectSlots.js"
import * as Telemetry from "../../Telemetry.js"

const pgClientTypeId = "~@effect/sql-pg/PgClient"

interface PgClientLike {
  readonly config?: {
    readonly transformResultNames?: unknown
    readonly transformQueryNames?: unknown
    readonly maxConnections?: unknown
  }
}

/**
 * The app's `PgClient`, its module loaded when asked for: `@effect/sql-pg` is an optional peer
 * (SQLite apps need not install it), and only this folder loads PostgreSQL's client packages.
 */
export const client: Effect.Effect<PgClient.PgClient, never, PgClient.PgClient> = Effect.flatMap(
  Effect.promise(() => import("@effect/sql-pg")),
  (module) => module.PgClient.PgClient
)

/**
 * The app's `PgClient`, for code whose public signature asks for a `SqlClient` (as
 * `ChangeTap.layerFleet` does, so that the declarations an app reaches never name `@effect/sql-pg`,
 * an optional peer a SQLite app does not install): dies saying what to provide when the
 * `SqlClient` is not PostgreSQL's.
 */
export const clientOf = (what: string): Effect.Effect<PgClient.PgClient, never, SqlClient.SqlClient> =>
  Effect.zipRight(
    SqlClient.SqlClient,
    Effect.flatMap(
      Effect.promise(() => import("@effect/sql-pg")),
      (module) =>
        Effect.flatMap(Effect.serviceOption(module.PgClient.PgClient), (pg) =>
          Option.isSome(pg)
            ? Effect.succeed(pg.value)
            : Effect.dieMessage(`${what} needs PostgreSQL: provide PgClient.layer from @effect/sql-pg, not another SqlClient`))
    )
  )

/** Direct statements on one client's connections. */
export interface Direct {
  /**
   * `text` with `parameters` as an effect that runs it on a connection directly, when that changes
   * nothing for `fiber` (see the module doc), the reserved connection chosen when the effect runs;
   * `undefined` when the statement must go through the client.
   */
  readonly now: <A>(
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    text: string,
    parameters: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<A>, SqlError> | undefined
  /**
   * `text` sent when `now` would run it directly: now, on the connection chosen and taken in this
   * call, or queued for the first reserved connection given back (handed over in the call that
   * gives it back: no other fiber's transaction can take it in between), or, when none will be,
   * through the client's pool path; `answer` is called once, with the failure or the rows (and
   * `context`). `false`: the statement must go through the client; nothing was sent. No effect
   * per statement: for a caller inside its own `Effect.async` (the store's point read and one-row
   * insert), whose fiber resumes from `answer` with its final outcome. For statements whose
   * interruption needs no cancellation on the server: a read without locks (under MVCC it waits
   * for nothing but a table's exclusive lock), or a statement the caller awaits uninterruptibly.
   * An interrupted caller leaves at once; the connection stays busy until the server's answer
   * arrives (the other connections serve meanwhile). `answer` must not throw.
   */
  readonly send: <C>(
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    text: string,
    parameters: ReadonlyArray<unknown>,
    answer: (error: SqlError | undefined, rows: ReadonlyArray<Record<string, unknown>>, context: C) => void,
    context: C
  ) => boolean
  /** Whether `fiber`'s statements run on a reserved connection (outside a transaction, nothing in the way). */
  readonly reserved: (fiber: Fiber.RuntimeFiber<unknown, unknown>) => boolean
  /** A statement of the client's, compiled and run directly when `now` would, else through the client. */
  readonly statement: <A extends object>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /** `text` directly when `now` allows it, else `fallback` (the same statement through the client). */
  readonly run: <A>(
    text: string,
    parameters: ReadonlyArray<unknown>,
    fallback: Effect.Effect<ReadonlyArray<A>, SqlError>
  ) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /**
   * `body` in a transaction on an idle reserved connection, BEGIN and COMMIT sent on it directly,
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

/**
 * Makes node-postgres parse the statement named `name` again on `pg` the next time it is sent: the
 * server no longer has it (a `DEALLOCATE` or `DISCARD` ran on that connection, e.g. app code in a
 * transaction), and the driver, which remembers per connection the names it parsed, would send
 * only the name, refused ("prepared statement … does not exist"), for the connection's life.
 */
const forgetParsed = (pg: PgConnection, name: string): void => {
  const connection = Predicate.hasProperty(pg, "connection") ? pg.connection : undefined
  const parsed = Predicate.hasProperty(connection, "parsedStatements") ? connection.parsedStatements : undefined
  if (Predicate.isRecord(parsed)) delete parsed[name]
}

/** How long the cancellation of an interrupted statement may take (as the client's). */
const cancelTimeoutMs = 5_000

/** `pg` (it comes with `@effect/sql-pg`, an optional peer), loaded at the first cancellation. */
let pgModule: Promise<typeof PgDriver> | undefined
const loadPg = (): Promise<typeof PgDriver> => pgModule ??= import("pg")

/** Ends a connection opened for a cancellation (whatever state it reached); its failure is of no interest. */
const closeQuietly = (client: PgDriver.Client): void => {
  client.end().catch(() => undefined)
}

/** Statements of a fiber outside a transaction: on a reserved connection (see `PgDirectSlots`). */
const outside = Symbol("outside")

/**
 * Direct statements for `sql` when it is an `@effect/sql-pg` client without name transforms whose
 * connections expose their node-postgres client; otherwise `undefined`, and every statement goes
 * through the client. The reserved connections live as long as the scope.
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
    const poolSize = typeof config?.maxConnections === "number" ? config.maxConnections : undefined
    const bound = Slots.most(poolSize)
    // A pool too small to spare a connection (see `Slots.most`): statements outside a transaction take the client's path.
    const reserves = options.reserve !== false && bound > 0
    const slots = yield* Slots.make(sql, scope, runtime, bound, reserves)

    /** How a connection of this client's is opened (for cancellations: see `cancel`). */
    const settings = {
      ...ListenWatchdog.clientConfig((sql as unknown as PgClient.PgClient).config),
      connectionTimeoutMillis: cancelTimeoutMs
    }

    /**
     * Cancels the statement running on `pg` (best effort, as the client does), from a connection
     * opened for it and ended after. Not from a pool connection: every one may be held by a
     * transaction waiting for a lock the interrupted statement's transaction holds, and the pool's
     * wait cannot be interrupted (the timeout never fired), so the transaction never rolled back
     * and they all waited forever. Nor from the transaction's own, busy with the statement.
     */
    const cancel = (pg: PgConnection) => {
      const processId = pg.processID
      if (processId === null) return Effect.void
      return Effect.async<void>((resume) => {
        let client: PgDriver.Client | undefined
        let left = false
        const done = () => {
          if (client !== undefined) closeQuietly(client)
          resume(Effect.void)
        }
        loadPg().then((Pg) => {
          if (left) return
          const opened = new Pg.Client(settings)
          client = opened
          // Without an error listener a failed connection would throw from the driver's event emitter.
          opened.on("error", () => undefined)
          opened.connect()
            .then(() => opened.query("SELECT pg_cancel_backend($1)", [processId]))
            .then(done, done)
        }, done)
        return Effect.sync(() => {
          left = true
          if (client !== undefined) closeQuietly(client)
        })
      }).pipe(
        // Run from an interruption's handler (uninterruptible): the timeout must be able to leave it.
        Effect.interruptible,
        Effect.timeoutOption(cancelTimeoutMs),
        Effect.asVoid
      )
    }

    /** `text` as node-postgres's query: by name when prepared (see `preparedNames`). */
    const queryOf = (text: string, parameters: ReadonlyArray<unknown>) => {
      const name = preparedNames.get(text)
      return name === undefined ? text : { name, text, values: parameters as Array<unknown> }
    }

    /**
     * After `text` failed on `pg` with `error`: a prepared statement the server no longer has is
     * parsed again next time; a connection left unusable is not given to another statement (a
     * reserved one is dropped when given back, see `Slots.lost`). Before the connection is given back.
     */
    const failed = (pg: PgConnection, text: string, error: Error) => {
      if (Predicate.hasProperty(error, "code") && error.code === "26000") {
        const name = preparedNames.get(text)
        if (name !== undefined) forgetParsed(pg, name)
      }
      if (connectionLost(error)) slots.lost(pg)
    }

    /** `text` on a transaction's own connection. */
    const onConnection = <A>(pg: PgConnection, text: string, parameters: ReadonlyArray<unknown>) =>
      Effect.async<ReadonlyArray<A>, SqlError>((resume) => {
        let pending = true
        pg.query(queryOf(text, parameters), parameters as Array<unknown>, (error, result) => {
          pending = false
          if (error) {
            failed(pg, text, error)
            resume(Effect.fail(new SqlError({ cause: error, message: "Failed to execute statement" })))
          } else {
            resume(Effect.succeed(rowsOf(result) as ReadonlyArray<A>))
          }
        })
        return Effect.suspend(() => pending ? cancel(pg) : Effect.void)
      })

    /**
     * `text` on a reserved connection, chosen when the effect runs: an idle one, else the first
     * given back (see `PgDirectSlots`), else `fallback` (the client's pool path). A connection
     * whose statement was interrupted serves no other before the cancellation is done, so the
     * cancellation cannot reach the next statement.
     */
    const onSlot = <A>(
      text: string,
      parameters: ReadonlyArray<unknown>,
      fallback: () => Effect.Effect<ReadonlyArray<A>, SqlError>
    ) =>
      Effect.async<ReadonlyArray<A>, SqlError>((resume) => {
        let running: Slots.Slot | undefined
        let pending = true
        const run = (slot: Slots.Slot) => {
          running = slot
          slot.pg.query(queryOf(text, parameters), parameters as Array<unknown>, (error, result) => {
            pending = false
            if (error) failed(slot.pg, text, error)
            if (!slot.cancelling) slots.release(slot)
            if (error) {
              resume(Effect.fail(new SqlError({ cause: error, message: "Failed to execute statement" })))
            } else {
              resume(Effect.succeed(rowsOf(result) as ReadonlyArray<A>))
            }
          })
        }
        const waiter: Slots.Waiter = { run, away: () => resume(fallback()) }
        const idle = slots.take("statement")
        if (idle !== undefined) run(idle)
        else if (!slots.wait(waiter)) return resume(fallback())
        return Effect.suspend(() => {
          const slot = running
          if (slot === undefined) return Effect.sync(() => slots.unwait(waiter))
          if (!pending) return Effect.void
          slot.cancelling = true
          return Effect.ensuring(
            cancel(slot.pg),
            Effect.sync(() => {
              slot.cancelling = false
              if (!pending) slots.release(slot)
            })
          )
        })
      })

    /** Sends `text` on `slot` (taken for it), the answer to `answer`; gives the slot back first. */
    const sendOn = <C>(
      slot: Slots.Slot,
      text: string,
      parameters: ReadonlyArray<unknown>,
      answer: (error: SqlError | undefined, rows: ReadonlyArray<Record<string, unknown>>, context: C) => void,
      context: C
    ) =>
      slot.pg.query(queryOf(text, parameters), parameters as Array<unknown>, (error, result) => {
        if (error) failed(slot.pg, text, error)
        slots.release(slot)
        answered(error, result, answer, context)
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
      if (on !== outside) {
        on.query(queryOf(text, parameters), parameters as Array<unknown>, (error, result) => {
          if (error) failed(on, text, error)
          answered(error, result, answer, context)
        })
        return true
      }
      const idle = slots.take("statement")
      if (idle !== undefined) {
        sendOn(idle, text, parameters, answer, context)
        return true
      }
      return slots.wait({
        run: (slot) => sendOn(slot, text, parameters, answer, context),
        // The caller already waits for `answer`: the client's pool path answers it.
        away: () =>
          Runtime.runCallback(runtime)(sql.unsafe<Record<string, unknown>>(text, parameters), {
            onExit: (exit) =>
              Exit.isSuccess(exit)
                ? answer(undefined, exit.value, context)
                : answer(
                  Option.getOrElse(
                    Cause.failureOption(exit.cause),
                    () => new SqlError({ cause: Cause.squash(exit.cause), message: "Failed to execute statement" })
                  ),
                  noRows,
                  context
                )
          })
      })
    }

    /** Whether a statement of `fiber` may bypass the client (no tracer, no statement transformer). */
    const bypasses = (fiber: Fiber.RuntimeFiber<unknown, unknown>) =>
      !Telemetry.isInstalled(fiber.currentTracer) && Option.isNone(fiber.getFiberRef(Statement.currentTransformer))

    /**
     * Where a statement of `fiber` runs directly: its transaction's connection, or (`outside`) a
     * reserved one; `undefined`: through the client.
     */
    const connectionFor = (fiber: Fiber.RuntimeFiber<unknown, unknown>): PgConnection | typeof outside | undefined => {
      if (!bypasses(fiber)) return undefined
      const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
      return Option.isSome(transaction) ? pgOf(transaction.value[0]) : reserves ? outside : undefined
    }

    const now = <A>(fiber: Fiber.RuntimeFiber<unknown, unknown>, text: string, parameters: ReadonlyArray<unknown>) => {
      const on = connectionFor(fiber)
      if (on === undefined) return undefined
      return on === outside
        ? onSlot<A>(text, parameters, () => Effect.map(sql.unsafe(text, parameters), (rows) => rows as ReadonlyArray<unknown> as ReadonlyArray<A>))
        : onConnection<A>(on, text, parameters)
    }

    /**
     * Without the client's `withTransaction` a short write transaction skips a pool checkout, a
     * scope, a span and their bookkeeping: an idle reserved connection is held from BEGIN to
     * COMMIT (other fibers' statements use the other reserved connections meanwhile, or wait for
     * one, see `PgDirectSlots`). None idle: the client's transaction, on a connection of the pool.
     */
    const transaction = <A, E, R>(body: Effect.Effect<A, E, R>, fallback: Effect.Effect<A, E | SqlError, R>) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.withFiberRuntime<A, E | SqlError, R>((fiber) => {
          const context = fiber.currentContext
          const own = reserves && bypasses(fiber) &&
              Option.isNone(Context.getOption(context, SqlClient.TransactionConnection))
            ? slots.take("transaction")
            : undefined
          if (own === undefined) return restore(fallback)
          const inside = Context.add(context, SqlClient.TransactionConnection, [own.connection, 0] as const)
          return onConnection<never>(own.pg, "BEGIN", []).pipe(
            Effect.zipRight(Effect.locally(restore(body), FiberRef.currentContext, inside)),
            Effect.exit,
            Effect.flatMap((exit) =>
              Effect.zipRight(
                Effect.orDie(onConnection<never>(own.pg, Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK", [])),
                exit
              )
            ),
            Effect.ensuring(Effect.sync(() => slots.release(own)))
          )
        })
      )

    return {
      now,
      send,
      reserved: (fiber) => connectionFor(fiber) === outside,
      transaction,
      statement: <A extends object>(statement: Statement.Statement<A>) =>
        Effect.withFiberRuntime<ReadonlyArray<A>, SqlError>((fiber) => {
          const on = connectionFor(fiber)
          if (on === undefined) return statement
          const [text, parameters] = statement.compile()
          return on === outside ? onSlot<A>(text, parameters, () => statement) : onConnection<A>(on, text, parameters)
        }),
      run: <A>(text: string, parameters: ReadonlyArray<unknown>, fallback: Effect.Effect<ReadonlyArray<A>, SqlError>) =>
        Effect.withFiberRuntime<ReadonlyArray<A>, SqlError>((fiber) => {
          const on = connectionFor(fiber)
          if (on === undefined) return fallback
          return on === outside ? onSlot<A>(text, parameters, () => fallback) : onConnection<A>(on, text, parameters)
        })
    } satisfies Direct
  })
