/**
 * The rate-limit counters: one fixed window per key, started by the key's first request and
 * lasting `windowMs`; every request counts (refused ones too) until the window ends, then the
 * next request starts a new one. The time comes from the caller (the pipeline reads the Effect
 * `Clock`), so `TestClock` drives the windows on every tier.
 *
 * Tiers: `layerMemory` (one process; a `Map`, counted synchronously) and `layerSql` (SQLite or
 * PostgreSQL, table `_fw_rate_limits`: one atomic `INSERT … ON CONFLICT DO UPDATE … RETURNING`
 * per request, so replicas sharing the database share the count). `layerFromStore` picks the tier
 * matching the app's store.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import { RateLimitCounters } from "../app/tables.js"
import * as SchemaDiffer from "../kernel/schema/SchemaDiffer.js"
import type { Store } from "../kernel/store/Store.js"
import { RateLimitStoreMissing, RateLimitUnavailable } from "./Errors.js"
import * as SqlTier from "./SqlTier.js"

/** A key's window after counting one request. */
export interface Hit {
  /** Requests counted in the window, this one included. */
  readonly count: number
  /** When the window ends (epoch milliseconds). */
  readonly resetAt: number
}

/** The store operations. */
export interface RateLimitStoreShape {
  /** Counts one request for `key` at `now`; a window that ended by `now` starts anew. */
  readonly hit: (key: string, windowMs: number, now: number) => Effect.Effect<Hit, RateLimitUnavailable>
  /**
   * The same count, synchronously, for in-process tiers (`undefined` for the others): the
   * pipeline then spends no effect step per request on a counter that is one map update.
   */
  readonly unsafeHit: ((key: string, windowMs: number, now: number) => Hit) | undefined
}

/** The rate-limit counter service. */
export class RateLimitStore extends Context.Tag("@fw/framework/Http/RateLimitStore")<
  RateLimitStore,
  RateLimitStoreShape
>() {}

interface Window {
  count: number
  resetAt: number
}

/** How often (in clock time) the memory tier forgets ended windows. */
const memorySweepMs = 60_000

/** The in-process tier. Counting is one synchronous map update, so it is atomic within the process. */
export const makeMemory: Effect.Effect<RateLimitStoreShape> = Effect.sync(() => {
  // Windows are mutated in place: no allocation per request besides the returned hit.
  const windows = new Map<string, Window>()
  let lastSweep = 0
  const unsafeHit = (key: string, windowMs: number, now: number): Hit => {
    if (now - lastSweep >= memorySweepMs) {
      // Keys (IP addresses, subjects) come and go: ended windows are dropped so the map holds
      // only the keys seen within the longest window.
      lastSweep = now
      for (const [k, w] of windows) if (w.resetAt <= now) windows.delete(k)
    }
    const window = windows.get(key)
    if (window === undefined) {
      const started = { count: 1, resetAt: now + windowMs }
      windows.set(key, started)
      return { count: 1, resetAt: started.resetAt }
    }
    if (window.resetAt <= now) {
      window.count = 1
      window.resetAt = now + windowMs
    } else {
      window.count++
    }
    return { count: window.count, resetAt: window.resetAt }
  }
  return RateLimitStore.of({
    hit: (key, windowMs, now) => Effect.sync(() => unsafeHit(key, windowMs, now)),
    unsafeHit
  })
})

/** The in-process tier: counters live as long as the process. */
export const layerMemory: Layer.Layer<RateLimitStore> = Layer.effect(RateLimitStore, makeMemory)

/** Keys longer than this are stored as a digest (a `by` function may return any text). */
const maxStoredKeyLength = 200

/**
 * The primary key of a counter: the key itself, or a digest of a long one or of one holding a NUL
 * (which PostgreSQL text cannot store).
 */
export const storedKey = (key: string): string =>
  key.length <= maxStoredKeyLength && !key.includes("\u0000") ? key : `sha256:${createHash("sha256").update(key).digest("hex")}`

const unavailable = (error: SqlError) => new RateLimitUnavailable({ message: `rate-limit counters: ${error.message}` })

/**
 * The SQL tier over the provided `SqlClient` (SQLite or PostgreSQL). One statement per request:
 * the insert starts a window, a conflict either counts one more or, when the stored window has
 * ended, starts a new one; the row lock of the upsert makes concurrent requests (from any replica)
 * count one after the other. (rate-limiter-flexible's PostgreSQL store uses the same statement.)
 */
export const makeSql: Effect.Effect<RateLimitStoreShape, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const table = sql(RateLimitCounters.name)
  return RateLimitStore.of({
    hit: (key, windowMs, now) =>
      sql<{ readonly count: number | string; readonly resetAt: number | string }>`INSERT INTO ${table} AS r ("id", "count", "resetAt")
        VALUES (${storedKey(key)}, 1, ${now + windowMs})
        ON CONFLICT ("id") DO UPDATE SET
          "count" = CASE WHEN r."resetAt" <= ${now} THEN 1 ELSE r."count" + 1 END,
          "resetAt" = CASE WHEN r."resetAt" <= ${now} THEN ${now + windowMs} ELSE r."resetAt" END
        RETURNING "count", "resetAt"`.pipe(
        Effect.map((rows) => ({ count: Number(rows[0]!.count), resetAt: Number(rows[0]!.resetAt) })),
        Effect.mapError(unavailable)
      ),
    unsafeHit: undefined
  })
})

/** How often ended windows are deleted (SQL tier). */

/**
 * The SQL tier. Creates `_fw_rate_limits` when missing (through the schema differ, which never
 * drops anything), makes it `UNLOGGED` on PostgreSQL, and deletes ended windows every 10 minutes.
 */
export const layerSql: Layer.Layer<RateLimitStore, SqlError, SqlClient.SqlClient> = Layer.scoped(
  RateLimitStore,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* SchemaDiffer.apply([RateLimitCounters])
    if (sql.onDialectOrElse({ pg: () => true, orElse: () => false })) {
      // Counters are worth neither a WAL record nor a flush at every request's commit: unlogged,
      // a burst on one key is not serialised on disk flushes (several times the throughput here).
      // A crash empties the table, which restarts every window: a lenient, bounded failure.
      const logged = yield* sql<{ readonly relpersistence: string }>`SELECT relpersistence FROM pg_class
        WHERE oid = to_regclass(${`"${RateLimitCounters.name}"`})`
      if (logged[0]?.relpersistence === "p") yield* sql`ALTER TABLE ${sql(RateLimitCounters.name)} SET UNLOGGED`
    }
    yield* SqlTier.sweepExpired(RateLimitCounters.name, "resetAt", "rate-limit")
    return yield* makeSql
  })
)

/**
 * The tier matching the app's store: memory for the memory store, SQL over the `SqlClient` in
 * context for a SQL store (dies with `RateLimitStoreMissing` when there is none: provide
 * `layerSql`, or `layerMemory` for a single process, explicitly then).
 */
export const layerFromStore: Layer.Layer<RateLimitStore, SqlError, Store> = SqlTier.fromStore(layerMemory, layerSql, () =>
  new RateLimitStoreMissing(
    "rate limits are declared over a SQL store, but no SqlClient is in context: provide RateLimitStore.layerSql (or layerMemory)"
  ))

export { RateLimitStoreMissing, RateLimitUnavailable } from "./Errors.js"
