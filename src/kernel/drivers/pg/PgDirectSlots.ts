/**
 * The connections `PgDirect` runs statements on outside transactions: reserved from the client's
 * pool as concurrency needs them, up to a bound that leaves the pool connections of its own (see
 * `most`), and held for the scope's lifetime. A statement takes an idle one in the same call (no
 * other fiber can take it in between); when none is idle it waits for the first to be given back,
 * as a statement waits for a connection of a pool, unless no connection can be given back without
 * another fiber's help (each held by a transaction, or none reserved): it then takes the client's
 * pool path. A connection that fails (a terminated backend, a lost network path) is dropped, and
 * another is reserved when a statement needs one: when the driver reports it failed or ended, or
 * when it is given back after a statement on it failed in a way that leaves it unusable (see
 * `lost`), whichever comes first.
 */
import type { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import type { Runtime as RuntimeType } from "effect"
import { ExecutionStrategy, Exit, Predicate, Runtime, Scope } from "effect"
import { Effect } from "effect"

/** The part of a node-postgres client used here. */
export interface PgConnection {
  readonly processID: number | null
  readonly query: (
    text: string | { readonly name: string; readonly text: string; readonly values: Array<unknown> },
    values: Array<unknown> | undefined,
    callback: (error: Error | null, result: { readonly rows?: ReadonlyArray<unknown> } | ReadonlyArray<unknown>) => void
  ) => void
  readonly on: (event: "error" | "end", listener: () => void) => unknown
  readonly off: (event: "error" | "end", listener: () => void) => unknown
  /** Closes the connection; the pool it came from discards it when given back. */
  readonly end: () => unknown
}

const isPgConnection = (value: unknown): value is PgConnection =>
  Predicate.hasProperty(value, "query") && typeof value.query === "function" && Predicate.hasProperty(value, "on") &&
  typeof value.on === "function" && Predicate.hasProperty(value, "end") && typeof value.end === "function"

/** The node-postgres client behind an `@effect/sql-pg` connection (its `pg` field), if it has one. */
export const pgOf = (connection: Connection): PgConnection | undefined => {
  const pg = Predicate.hasProperty(connection, "pg") ? connection.pg : undefined
  return isPgConnection(pg) ? pg : undefined
}

/**
 * What a reserved connection is doing: nothing; running a statement (given back when the server
 * answers, whatever other fibers do); held by a transaction (given back when that fiber commits or
 * rolls back).
 */
export type Use = "idle" | "statement" | "transaction"

/** One reserved connection and how to give it back to the pool. */
export class Slot {
  use: Use = "idle"
  dead = false
  /** A statement on it failed in a way that leaves it unusable (see `Slots.lost`): dropped when given back. */
  lost = false
  /** An interrupted statement's cancellation is under way: the connection waits for it before serving another. */
  cancelling = false
  constructor(
    readonly connection: Connection,
    readonly pg: PgConnection,
    readonly scope: Scope.CloseableScope,
    readonly onFailure: () => void
  ) {}
}

/** A statement waiting for a reserved connection. */
export interface Waiter {
  /** Runs the statement on `slot`, already taken for it (`"statement"`). */
  readonly run: (slot: Slot) => void
  /** No connection will be given back without another fiber's help: the statement takes the pool path. */
  readonly away: () => void
}

/** The reserved connections of one `PgDirect`. */
export interface Slots {
  /** An idle connection, taken for `use` in this call; `undefined` when none is (a reservation may start). */
  readonly take: (use: "statement" | "transaction") => Slot | undefined
  /**
   * Queues `waiter` for the next connection given back, when one will be without another fiber's
   * help (a statement runs on it, or a reservation is under way); `false`: nothing was queued.
   */
  readonly wait: (waiter: Waiter) => boolean
  /** Removes a waiter not yet served (its fiber was interrupted). */
  readonly unwait: (waiter: Waiter) => void
  /** Gives `slot` back: to the first waiter if any, else idle; dropped instead if it was `lost`. */
  readonly release: (slot: Slot) => void
  /**
   * A statement on `pg` failed in a way that leaves the connection unusable (`connectionLost`): if
   * it is a reserved one, it is dropped when given back, not handed to the next statement.
   * node-postgres reports such a connection ended only a moment later (after the statement that
   * met the server's FATAL has failed), so a statement sent on it meanwhile would fail too.
   */
  readonly lost: (pg: PgConnection) => void
}

/** After a failed reservation, the next attempt waits this long (the database may be away). */
const retryReserveMs = 1_000
/** node-postgres's pool size when none is configured. */
const defaultPoolSize = 10

/**
 * How many connections of a pool of `poolSize` direct statements may hold: all but two (at least
 * one), which serve the client's own transactions and statements (those with a tracer, a
 * transformer, a transaction begun while every reserved connection was busy, the cancellation of
 * an interrupted statement). A pool of one keeps its connection: reserved, it left the client's
 * path none, and a transaction begun while a direct statement ran waited forever for it (the
 * pool's wait cannot be interrupted).
 */
export const most = (poolSize: number | undefined): number => {
  const size = poolSize ?? defaultPoolSize
  return size <= 1 ? 0 : Math.max(1, size - 2)
}

/**
 * The reserved connections of `sql`, at most `bound`, given back with `scope`. `reserveNow`: one
 * is reserved before this returns, so the first statements need not wait for it.
 */
export const make = (
  sql: SqlClient.SqlClient,
  scope: Scope.Scope,
  runtime: RuntimeType.Runtime<never>,
  bound: number,
  reserveNow: boolean
): Effect.Effect<Slots> =>
  Effect.gen(function*() {
    const slots: Array<Slot> = []
    const waiters: Array<Waiter> = []
    let reserving = false
    let closed = false
    let nextReserveAt = 0
    yield* Scope.addFinalizer(scope, Effect.sync(() => {
      closed = true
    }))

    /** Whether a queued statement will be served without another fiber's help. */
    const served = () => reserving || slots.some((slot) => slot.use === "statement")

    /** Waiters that no connection will serve take the pool path. */
    const strandedAway = () => {
      if (waiters.length === 0 || served()) return
      for (const waiter of waiters.splice(0)) waiter.away()
    }

    const drop = (dead: Slot) => {
      if (dead.dead) return
      dead.dead = true
      const at = slots.indexOf(dead)
      if (at >= 0) slots.splice(at, 1)
      dead.pg.off("error", dead.onFailure)
      dead.pg.off("end", dead.onFailure)
      // Still open as far as node-postgres knows (it reports the end a moment later): the pool would
      // keep it, and hand it to the next reservation. Ended, it is discarded when given back.
      if (dead.lost) Promise.resolve(dead.pg.end()).catch(() => undefined)
      // Closing the reservation's scope gives the connection back to the pool, which discards a failed one.
      Runtime.runFork(runtime)(Scope.close(dead.scope, Exit.void))
      strandedAway()
    }

    const release = (slot: Slot) => {
      if (slot.lost) drop(slot)
      if (slot.dead) {
        slot.use = "idle"
        return strandedAway()
      }
      const next = waiters.shift()
      if (next === undefined) {
        slot.use = "idle"
      } else {
        // Handed over in this call: no transaction can take the connection in between.
        slot.use = "statement"
        next.run(slot)
      }
    }

    /**
     * Reserves a connection (in the background, but for the first); it serves the first waiter at
     * once, and another is reserved while statements still wait. One reservation at a time.
     */
    const reserve: Effect.Effect<void> = Effect.gen(function*() {
      const own = yield* Scope.fork(scope, ExecutionStrategy.sequential)
      const connection = yield* Scope.extend(sql.reserve, own).pipe(
        Effect.tapError(() => Scope.close(own, Exit.void))
      )
      const pg = pgOf(connection)
      if (pg === undefined || closed) {
        yield* Scope.close(own, Exit.void)
        return undefined
      }
      const slot: Slot = new Slot(connection, pg, own, () => drop(slot))
      pg.on("error", slot.onFailure)
      pg.on("end", slot.onFailure)
      slots.push(slot)
      return slot
    }).pipe(
      Effect.catchAllCause(() =>
        Effect.sync(() => {
          nextReserveAt = Date.now() + retryReserveMs
          return undefined
        })
      ),
      Effect.onExit((exit) =>
        Effect.sync(() => {
          reserving = false
          const slot = Exit.isSuccess(exit) ? exit.value : undefined
          if (slot !== undefined) {
            slot.use = "statement"
            release(slot)
            if (waiters.length > 0) grow()
          }
          strandedAway()
        })
      ),
      Effect.asVoid
    )

    const grow = () => {
      if (!reserving && !closed && slots.length < bound && Date.now() >= nextReserveAt) {
        reserving = true
        Runtime.runFork(runtime)(reserve)
      }
    }

    if (reserveNow) {
      reserving = true
      yield* reserve
    } else {
      closed = true
    }

    return {
      take: (use) => {
        for (let i = 0; i < slots.length; i++) {
          const slot = slots[i]!
          if (slot.use === "idle") {
            slot.use = use
            return slot
          }
        }
        grow()
        return undefined
      },
      wait: (waiter) => {
        if (!served()) return false
        waiters.push(waiter)
        return true
      },
      unwait: (waiter) => {
        const at = waiters.indexOf(waiter)
        if (at >= 0) waiters.splice(at, 1)
      },
      release,
      lost: (pg) => {
        for (let i = 0; i < slots.length; i++) {
          if (slots[i]!.pg === pg) slots[i]!.lost = true
        }
      }
    } satisfies Slots
  })
