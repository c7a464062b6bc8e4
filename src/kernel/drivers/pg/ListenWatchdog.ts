/**
 * ListenWatchdog: a PostgreSQL LISTEN on a connection of its own, checked by a heartbeat and
 * replaced by a fresh connection when it goes deaf.
 *
 * Why not `PgClient.listen` of `@effect/sql-pg`: it shares one connection between listens and,
 * when a listen stops, waits without a bound for the answer to its `UNLISTEN`. On a connection
 * that stays open but no longer delivers anything (a half-dead network middlebox, a server gone
 * without closing the socket) that answer never comes: replacing the listen hung for good (so the
 * replica never listened again), the replica's shutdown hung with it, and a new listen would have
 * been handed the same deaf connection. Here every LISTEN gets a new connection, and a connection
 * is dropped without waiting on it: ending the session ends its LISTEN.
 */
import type { PgClient } from "@effect/sql-pg"
import { Deferred, Effect, Exit, FiberId, Queue, Redacted } from "effect"
import type { Scope } from "effect"
import type { Client, ClientConfig, Notification } from "pg"

/** Options of `make`. */
export interface Options {
  /** The connection settings of the app's `PgClient`; the LISTEN connection uses the same server and credentials. */
  readonly config: PgClient.PgClientConfig
  readonly channel: string
  /** The payload of this listener's heartbeat (unique to it): counted, never handed to `onPayload`. */
  readonly heartbeat: string
  /** Sends `payload` on `channel` over another connection (the pool): the heartbeat must cross the server. */
  readonly notify: (payload: string) => Effect.Effect<void, unknown>
  /**
   * Every other notification on `channel`, in arrival order, called as it arrives (synchronously,
   * from the connection's event: a notification costs no fiber step of its own). Must not throw.
   */
  readonly onPayload: (payload: string) => void
  /**
   * Runs when the LISTEN connection was found deaf or closed (before it is replaced) and again once
   * a fresh one listens: whatever was announced in between was not heard, and must be read.
   */
  readonly onMissed: Effect.Effect<void>
  /** How often the heartbeat is sent (on the Effect clock). */
  readonly checkMs: number
  /** How long a heartbeat may take to come back before the connection counts as deaf (default 2 s). */
  readonly hearMs?: number
  /** Bound on connecting and LISTEN on a fresh connection (default 10 s, on the real timer). */
  readonly openMs?: number
  /** Bound on ending a dropped connection politely before its socket is destroyed (default 1 s, on the real timer). */
  readonly closeMs?: number
}

/** A running LISTEN. */
export interface ListenWatchdog {
  /** True while a connection is in place whose LISTEN the server confirmed (and not since found deaf or closed). */
  readonly listening: Effect.Effect<boolean>
}

/** One LISTEN connection and what it has heard of its heartbeat. */
interface Live {
  readonly client: Client
  ended: boolean
  heard: number
  heardWaiters: Array<Deferred.Deferred<void>>
}

/** Why a fresh connection could not listen. */
class ListenFailed {
  readonly _tag = "ListenFailed"
  constructor(readonly reason: unknown) {}
}

/** Sleeps on the real timer: startup and shutdown bounds must hold under a test clock too. */
const realSleep = (ms: number) =>
  Effect.async<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

/** The `pg` client settings for `config`, as `@effect/sql-pg` builds them for its pool. */
export const clientConfig = (config: PgClient.PgClientConfig): ClientConfig => {
  const settings: ClientConfig = {
    application_name: config.applicationName ?? "@effect/sql-pg",
    // The OS notices a connection whose peer vanished (the heartbeat notices the rest).
    keepAlive: true
  }
  if (config.url !== undefined) settings.connectionString = Redacted.value(config.url)
  if (config.host !== undefined) settings.host = config.host
  if (config.port !== undefined) settings.port = config.port
  if (config.database !== undefined) settings.database = config.database
  if (config.username !== undefined) settings.user = config.username
  if (config.password !== undefined) settings.password = Redacted.value(config.password)
  if (config.ssl !== undefined) settings.ssl = config.ssl
  if (config.stream !== undefined) settings.stream = config.stream
  if (config.types !== undefined) settings.types = config.types
  return settings
}

/**
 * Listens on `channel` for the lifetime of the scope. Returns once the first LISTEN is confirmed
 * by the server, or (if that failed or took longer than `openMs`) once it has been given up: the
 * next check tries again. Never fails.
 *
 * Every `checkMs` a heartbeat is sent through `notify`; a connection that does not hear it within
 * `hearMs`, or that closed, is dropped (ended politely for at most `closeMs`, then its socket
 * destroyed, never waiting on an answer) and a fresh connection LISTENs in its place. A
 * connection that closes is replaced at once, without waiting for the next check.
 */
export const make = (options: Options): Effect.Effect<ListenWatchdog, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Type only above: `pg` comes with `@effect/sql-pg`, an optional peer loaded when a fleet tap is built.
    const Pg = yield* Effect.promise(() => import("pg"))
    const hearMs = options.hearMs ?? 2_000
    const openMs = options.openMs ?? 10_000
    const closeMs = options.closeMs ?? 1_000
    // Asks for a check before the next heartbeat is due (the connection closed).
    const recheck = yield* Queue.sliding<void>(1)
    let current: Live | undefined

    const heardOnce = (live: Live) => {
      live.heard++
      for (const waiter of live.heardWaiters) Deferred.unsafeDone(waiter, Exit.void)
      live.heardWaiters = []
    }
    const closed = (live: Live) => {
      if (live.ended) return
      live.ended = true
      for (const waiter of live.heardWaiters) Deferred.unsafeDone(waiter, Exit.void)
      live.heardWaiters = []
      if (current === live) recheck.unsafeOffer(undefined)
    }

    /** Ends `live` politely if the server still hears it, and in any case destroys its socket within `closeMs`. */
    const drop = (live: Live) =>
      Effect.suspend(() => {
        closed(live)
        live.client.removeAllListeners("notification")
        // Terminate reaches a server the connection can still talk to (only its answers are lost),
        // which then ends the session and its LISTEN; nothing waits for more than `closeMs`.
        const ended = Effect.promise(() => live.client.end().catch(() => undefined))
        // (Finalizers are uninterruptible: the race's loser must be made interruptible to lose.)
        return Effect.interruptible(Effect.raceFirst(ended, realSleep(closeMs))).pipe(
          Effect.ensuring(Effect.sync(() => live.client.connection.stream.destroy()))
        )
      })

    /** A fresh connection whose LISTEN the server confirmed; dropped if that fails or takes longer than `openMs`. */
    const open = Effect.suspend(() => {
      const client = new Pg.Client(clientConfig(options.config))
      const live: Live = { client, ended: false, heard: 0, heardWaiters: [] }
      // Without an error listener a dead connection would throw from the driver's event emitter.
      client.on("error", () => closed(live))
      client.on("end", () => closed(live))
      client.on("notification", (message: Notification) => {
        if (message.channel !== options.channel || message.payload === undefined) return
        if (message.payload === options.heartbeat) heardOnce(live)
        else options.onPayload(message.payload)
      })
      const listen = Effect.tryPromise({
        try: async () => {
          await client.connect()
          await client.query(`LISTEN ${Pg.escapeIdentifier(options.channel)}`)
        },
        catch: (cause) => new ListenFailed(cause)
      })
      const timedOut = Effect.zipRight(realSleep(openMs), Effect.fail(new ListenFailed(`no answer within ${openMs} ms`)))
      return Effect.interruptible(Effect.raceFirst(listen, timedOut)).pipe(
        Effect.flatMap(() => live.ended ? Effect.fail(new ListenFailed("the connection closed")) : Effect.succeed(live)),
        Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : drop(live))
      )
    })

    /** Whether `live` hears a heartbeat sent through the pool; undefined when it could not be sent. */
    const hears = (live: Live) =>
      Effect.gen(function*() {
        const before = live.heard
        const heard = Deferred.unsafeMake<void>(FiberId.none)
        live.heardWaiters.push(heard)
        const sent = yield* Effect.exit(options.notify(options.heartbeat))
        if (Exit.isFailure(sent)) {
          live.heardWaiters = live.heardWaiters.filter((waiter) => waiter !== heard)
          yield* Effect.logWarning("fleet change listener check: the heartbeat could not be sent", sent.cause)
          return undefined
        }
        yield* Deferred.await(heard).pipe(Effect.timeout(hearMs), Effect.ignore)
        return !live.ended && live.heard > before
      })

    const check = Effect.gen(function*() {
      const live = current
      if (live !== undefined) {
        if (!live.ended) {
          const heard = yield* hears(live)
          if (heard !== false) return
        }
        yield* Effect.logWarning(
          live.ended
            ? "fleet change listener connection closed; listening on a fresh connection"
            : `fleet change listener went deaf (its heartbeat did not come back within ${hearMs} ms); listening on a fresh connection`
        )
        current = undefined
        // Read now: what was announced since the connection went deaf was not heard.
        yield* options.onMissed
        yield* drop(live)
      }
      const fresh = yield* Effect.either(open)
      if (fresh._tag === "Left") {
        yield* Effect.logWarning("fleet change listener could not listen; retried at the next check", fresh.left.reason)
        return
      }
      current = fresh.right
      // Read again: what committed while the fresh connection was being set up announced itself to no one.
      yield* options.onMissed
    })

    yield* Effect.addFinalizer(() => current === undefined ? Effect.void : drop(current))

    const first = yield* Effect.either(open)
    if (first._tag === "Right") current = first.right
    else yield* Effect.logWarning("fleet change listener could not listen; retried at the next check", first.left.reason)

    yield* Queue.take(recheck).pipe(
      Effect.timeout(options.checkMs),
      Effect.ignore,
      Effect.zipRight(check),
      Effect.forever,
      Effect.forkScoped
    )

    return { listening: Effect.sync(() => current !== undefined && !current.ended) }
  })
