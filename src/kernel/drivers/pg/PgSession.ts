/**
 * PgSession: a PostgreSQL connection of its own (not from the pool) for a background worker's
 * repeated statements — the fleet tap's outbox reads and announcements. Through the client each
 * statement pays a pool checkout and release, a connection scope, a span (also without a tracer:
 * the built-in one), a compile and a parse and plan on the server; here it is one `query` call of a
 * statement prepared once per connection.
 *
 * With a tracer installed, or a statement transformer (`Statement.setTransformer`), or a client
 * that transforms names, statements take the client's path as before (spans kept). The connection
 * is opened on first use; one that fails or closes (a terminated backend, a restart) is dropped and
 * a fresh one opened by the next statement: when the driver reports it, or when a statement on it
 * fails in a way that leaves it unusable (`connectionLost`), whichever comes first. A statement
 * the server refuses to run as prepared on that connection (see `replan`) drops it and runs once
 * more on a fresh one; statements already queued on that connection run there, and it is ended
 * after them. Failures are the client's `SqlError`s.
 */
// Type only: `@effect/sql-pg` (and `pg` with it) is an optional peer, loaded when a session is made.
import type { PgClient } from "@effect/sql-pg"
import { Statement } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Option, Predicate } from "effect"
import type { Scope } from "effect"
import type { Client } from "pg"
import { clientConfig } from "./ListenWatchdog.js"
import { connectionLost } from "./PgConnectionLost.js"
import * as Telemetry from "../../Telemetry.js"

/** A statement run on the session's connection, prepared there once under `name`. */
export interface Prepared {
  /** Unique per session: the server keeps the statement under this name for the connection's life. */
  readonly name: string
  readonly text: string
}

/** A connection of its own for repeated statements. */
export interface PgSession {
  /** Runs `statement` with `parameters` on the session's connection, or through the client (see the module doc). */
  readonly run: <A>(statement: Prepared, parameters: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>
}

/** One connection and whether it was dropped. */
interface Live {
  readonly client: Client
  readonly ready: Promise<void>
  dropped: boolean
  /** Statements handed to it and not yet answered (queued on the connection, or running). */
  pending: number
  /** Being ended (once). */
  ending: boolean
}

/**
 * A prepared statement the server will not run again on its connection, though it would prepare
 * and run it afresh: its result type changed ("cached plan must not change result type", after an
 * `ALTER TABLE … ALTER COLUMN … TYPE`, as a migration in a rolling upgrade runs), or it no longer
 * exists there (26000). The statement did not run (refused before execution, outside any
 * transaction): running it again on a fresh connection is safe.
 */
const replan = (error: Error): boolean => {
  const code = Predicate.hasProperty(error, "code") ? error.code : undefined
  return code === "0A000" || code === "26000"
}

/** How long closing may wait for the server to end the session politely before the socket is destroyed. */
const closeMs = 1_000

/** Options of `make`. */
export interface Options {
  /**
   * How the server plans the session's statements (default `custom`): `custom` plans each run for
   * its parameters, as an unnamed statement is (a plan made once for any parameters may scan a
   * whole table where the values at hand select a few rows); `generic` plans each statement once
   * per connection, for statements written to have the same good plan whatever the values (the
   * fleet tap's outbox read: planned per run, its planning took 0.3–0.6 ms of server time, three to
   * five times its execution, on every read).
   */
  readonly plans?: "custom" | "generic"
}

/** A session on `pg`'s server, closed with the scope. */
export const make = (pg: PgClient.PgClient, options: Options = {}): Effect.Effect<PgSession, never, Scope.Scope> =>
  Effect.gen(function*() {
    const planSetting = `SET plan_cache_mode = force_${options.plans ?? "custom"}_plan`
    const Pg = yield* Effect.promise(() => import("pg"))
    const settings = clientConfig(pg.config)
    // Rows come back exactly as the client would return them only without name transforms.
    const transforms = pg.config.transformResultNames !== undefined || pg.config.transformQueryNames !== undefined
    let current: Live | undefined
    let closed = false

    /** Connections not yet ended (the current one, and retired ones still answering): ended with the scope. */
    const lives = new Set<Live>()
    const end = (live: Live) => {
      if (live.ending) return
      live.ending = true
      lives.delete(live)
      const timer = setTimeout(() => live.client.connection.stream.destroy(), closeMs)
      live.client.end().catch(() => undefined).finally(() => clearTimeout(timer))
    }
    /** A connection gone or unusable: no statement is sent on it again, and it is ended now. */
    const drop = (live: Live) => {
      retire(live)
      end(live)
    }
    /**
     * A sound connection that keeps a statement the server refuses (`replan`): the next statements
     * open a fresh one, and it is ended once the statements queued on it are answered. Ended at once,
     * those queued behind the refused one (never sent) failed with "Connection terminated".
     */
    const retire = (live: Live) => {
      if (!live.dropped) {
        live.dropped = true
        if (current === live) current = undefined
      }
      if (live.pending === 0) end(live)
    }
    const open = (): Live => {
      const client = new Pg.Client(settings)
      // Planned as `options.plans` says, not by PostgreSQL's own choice after five runs (see
      // `Options`). Servers before 12 have no such setting: ignored.
      const ready = client.connect().then(() => client.query(planSetting).then(() => undefined, () => undefined))
      const live: Live = { client, ready, dropped: false, pending: 0, ending: false }
      lives.add(live)
      // Without an error listener a dead connection would throw from the driver's event emitter.
      client.on("error", () => drop(live))
      client.on("end", () => drop(live))
      live.ready.catch(() => drop(live))
      return live
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        for (const live of [...lives]) drop(live)
      })
    )

    /** `statement` on the session's connection; `retries`: how many more times a `replan` failure runs it afresh. */
    const direct = <A>(statement: Prepared, parameters: ReadonlyArray<unknown>, retries = 1) =>
      Effect.async<ReadonlyArray<A>, SqlError>((resume) => {
        const fail = (cause: unknown) => resume(Effect.fail(new SqlError({ cause, message: "Failed to execute statement" })))
        if (closed) return fail(new Error("the session is closed"))
        const live = current ??= open()
        live.pending++
        /** This statement is answered: a retired connection is ended after its last. */
        const answered = () => {
          live.pending--
          if (live.dropped && live.pending === 0) end(live)
        }
        live.ready.then(() => {
          live.client.query<Record<string, unknown>>(
            { name: statement.name, text: statement.text, values: parameters as Array<unknown> },
            (error, result) => {
              answered()
              if (!error) return resume(Effect.succeed(result.rows as unknown as ReadonlyArray<A>))
              const again = replan(error)
              // The next statement opens a fresh connection: this one is gone (ended now), or keeps
              // the refused statement (ended once the statements queued behind it are answered).
              if (connectionLost(error)) drop(live)
              else if (again) retire(live)
              if (again && retries > 0) return resume(direct<A>(statement, parameters, retries - 1))
              fail(error)
            }
          )
        }, (cause) => {
          answered()
          fail(cause)
        })
      })

    return {
      run: <A>(statement: Prepared, parameters: ReadonlyArray<unknown>) =>
        Effect.withFiberRuntime<ReadonlyArray<A>, SqlError>((fiber) =>
          transforms || Telemetry.isInstalled(fiber.currentTracer) ||
            Option.isSome(fiber.getFiberRef(Statement.currentTransformer))
            ? pg.unsafe<A & object>(statement.text, parameters)
            : direct<A>(statement, parameters)
        )
    }
  })
