/**
 * The idempotency record store (spec 2.10, 3.6). A key is claimed atomically per scope
 * (tenant, method, path, key) for a lease that its holder renews while the handler runs; the holder
 * completes it with the response to replay (kept `ttlMs` from then), or releases it so a retry runs
 * again. A record past its expiry (a lapsed lease: the holder died; or an old answer) is taken over
 * by the next request.
 *
 * Tiers: `layerMemory` (one process) and `layerSql` (SQLite or PostgreSQL, table
 * `_fw_idempotency`; replicas sharing a database agree). `layerFromStore` picks the tier matching
 * the app's store.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Data, Effect, Layer } from "effect"
import { createHash, randomUUID } from "node:crypto"
import * as SchemaDiffer from "../kernel/schema/SchemaDiffer.js"
import type { Store } from "../kernel/store/Store.js"
import { IdempotencyRecords } from "../app/tables.js"
import { IdempotencyStoreMissing, IdempotencyUnavailable } from "./Errors.js"
import * as SqlTier from "./SqlTier.js"

/** Which requests share a key. */
export interface Scope {
  readonly tenant: string
  readonly method: string
  readonly path: string
  readonly key: string
}

/** A response kept for replay. */
export interface StoredResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

/** The outcome of a claim. */
export type Claim = Data.TaggedEnum<{
  /** The caller holds the key and runs the handler; `owner` completes or releases it. */
  Claimed: { readonly owner: string }
  /** Another request with this key is running. */
  InFlight: {}
  /** The key's first request completed: replay its response. */
  Completed: { readonly response: StoredResponse }
  /** The key was used for a different request (another body or query). */
  Mismatch: {}
}>
/** Constructors of `Claim`. */
export const Claim = Data.taggedEnum<Claim>()

/** The store operations. */
export interface IdempotencyStoreShape {
  /** Claims `scope` for a request with `fingerprint`, leased for `leaseMs` from now. */
  readonly claim: (scope: Scope, fingerprint: string, leaseMs: number) => Effect.Effect<Claim, IdempotencyUnavailable>
  /** Extends the lease of the claim held by `owner` to `leaseMs` from now; false when it is no longer held. */
  readonly renew: (scope: Scope, owner: string, leaseMs: number) => Effect.Effect<boolean, IdempotencyUnavailable>
  /** Stores the response of the claim held by `owner`, kept for replay `ttlMs` from now. */
  readonly complete: (
    scope: Scope,
    owner: string,
    response: StoredResponse,
    ttlMs: number
  ) => Effect.Effect<void, IdempotencyUnavailable>
  /** Forgets the claim held by `owner`, so the next request with the key runs. */
  readonly release: (scope: Scope, owner: string) => Effect.Effect<void, IdempotencyUnavailable>
}

/** The idempotency record store service. */
export class IdempotencyStore extends Context.Tag("@fw/framework/Http/IdempotencyStore")<
  IdempotencyStore,
  IdempotencyStoreShape
>() {}

/** The record id of a scope: a digest, so any key text fits the primary key. */
export const recordId = (scope: Scope): string =>
  createHash("sha256").update(`${scope.tenant}\0${scope.method}\0${scope.path}\0${scope.key}`).digest("hex")

interface MemoryRecord {
  readonly fingerprint: string
  readonly owner: string
  readonly expiresAt: number
  readonly response: StoredResponse | undefined
  /** What the record weighs: its stored body and headers. */
  readonly bytes: number
}

/** Bounds of the in-process tier. */
export interface MemoryBounds {
  /** At most this many records (default 10,000). */
  readonly maxRecords?: number
  /** At most this many bytes of stored answers (default 64 MiB). */
  readonly maxBytes?: number
}

/** The default bounds of the in-process tier. */
export const defaultMemoryBounds = { maxRecords: 10_000, maxBytes: 64 * 1024 * 1024 } as const

const weightOf = (response: StoredResponse): number => {
  let bytes = response.body.byteLength
  for (const [name, value] of Object.entries(response.headers)) bytes += name.length + value.length
  return bytes
}

/**
 * The in-process tier. The check and the claim run in one synchronous step, so the claim is atomic.
 * It is bounded: past `maxRecords` records or `maxBytes` of stored answers, expired records go
 * first, then the oldest completed ones (their retries run again, as after the TTL); records in
 * flight are never evicted: a claim finding only those answers `IdempotencyUnavailable` (503).
 */
export const makeMemoryBounded = (bounds: MemoryBounds = {}): Effect.Effect<IdempotencyStoreShape> =>
  Effect.sync(() => {
    const maxRecords = bounds.maxRecords ?? defaultMemoryBounds.maxRecords
    const maxBytes = bounds.maxBytes ?? defaultMemoryBounds.maxBytes
    // Insertion order is claim order (a completed record keeps its place), so the first completed
    // records met are the oldest.
    const records = new Map<string, MemoryRecord>()
    let bytes = 0
    let lastSweep = 0
    const remove = (id: string, record: MemoryRecord) => {
      records.delete(id)
      bytes -= record.bytes
    }
    const sweep = (now: number) => {
      lastSweep = now
      for (const [id, record] of records) if (record.expiresAt <= now) remove(id, record)
    }
    /** Makes room for one more record of `extra` bytes; false when only records in flight are left. */
    const makeRoom = (now: number, extra: number): boolean => {
      if (records.size < maxRecords && bytes + extra <= maxBytes) return true
      sweep(now)
      for (const [id, record] of records) {
        if (records.size < maxRecords && bytes + extra <= maxBytes) return true
        if (record.response !== undefined) remove(id, record)
      }
      return records.size < maxRecords && bytes + extra <= maxBytes
    }
    const full = new IdempotencyUnavailable({ message: "idempotency records: the in-process store is full of requests in flight" })
    return IdempotencyStore.of({
      claim: (scope, fingerprint, leaseMs) =>
        Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<Claim, IdempotencyUnavailable> => {
          if (now - lastSweep >= 60_000) sweep(now)
          const id = recordId(scope)
          const existing = records.get(id)
          if (existing !== undefined && existing.expiresAt > now) {
            if (existing.fingerprint !== fingerprint) return Effect.succeed(Claim.Mismatch())
            return Effect.succeed(existing.response === undefined ? Claim.InFlight() : Claim.Completed({ response: existing.response }))
          }
          if (existing !== undefined) remove(id, existing)
          if (!makeRoom(now, 0)) return Effect.fail(full)
          const owner = randomUUID()
          records.set(id, { fingerprint, owner, expiresAt: now + leaseMs, response: undefined, bytes: 0 })
          return Effect.succeed(Claim.Claimed({ owner }))
        }),
      renew: (scope, owner, leaseMs) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const id = recordId(scope)
          const existing = records.get(id)
          if (existing?.owner !== owner || existing.response !== undefined) return false
          records.set(id, { ...existing, expiresAt: now + leaseMs })
          return true
        }),
      complete: (scope, owner, response, ttlMs) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const id = recordId(scope)
          const existing = records.get(id)
          if (existing?.owner !== owner) return
          const weight = weightOf(response)
          // An answer that cannot fit is not kept: the key is freed, as if it had expired.
          remove(id, existing)
          if (weight > maxBytes || !makeRoom(now, weight)) return
          records.set(id, { ...existing, expiresAt: now + ttlMs, response, bytes: weight })
          bytes += weight
        }),
      release: (scope, owner) =>
        Effect.sync(() => {
          const id = recordId(scope)
          const existing = records.get(id)
          if (existing?.owner === owner) remove(id, existing)
        })
    })
  })

/** The in-process tier with the default bounds (10,000 records, 64 MiB of answers). */
export const makeMemory: Effect.Effect<IdempotencyStoreShape> = makeMemoryBounded()

/** The in-process tier: records live as long as the process. */
export const layerMemory: Layer.Layer<IdempotencyStore> = Layer.effect(IdempotencyStore, makeMemory)

interface Row {
  readonly fingerprint: string
  readonly state: string
  readonly status: number | string | null
  readonly headers: string | null
  readonly body: string | null
  readonly expiresAt: number | string
}

const unavailable = (error: SqlError) => new IdempotencyUnavailable({ message: `idempotency records: ${error.message}` })

/**
 * The SQL tier over the provided `SqlClient` (SQLite or PostgreSQL). The claim is an
 * `INSERT … ON CONFLICT DO NOTHING`; an expired record is taken over by a conditional `UPDATE`,
 * so of two racing requests exactly one wins either way.
 */
export const makeSql: Effect.Effect<IdempotencyStoreShape, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const table = sql(IdempotencyRecords.name)

  const read = (id: string) =>
    sql<Row>`SELECT "fingerprint", "state", "status", "headers", "body", "expiresAt" FROM ${table} WHERE "id" = ${id}`.pipe(
      Effect.map((rows) => rows[0])
    )

  const insert = (id: string, scope: Scope, fingerprint: string, owner: string, now: number, leaseMs: number) =>
    sql<{ readonly id: string }>`INSERT INTO ${table}
      ("id", "tenant", "method", "path", "key", "fingerprint", "state", "owner", "status", "headers", "body", "createdAt", "expiresAt")
      VALUES (${id}, ${scope.tenant}, ${scope.method}, ${scope.path}, ${scope.key}, ${fingerprint}, 'in-flight', ${owner},
        NULL, NULL, NULL, ${now}, ${now + leaseMs})
      ON CONFLICT ("id") DO NOTHING RETURNING "id"`

  const takeOver = (id: string, fingerprint: string, owner: string, now: number, leaseMs: number) =>
    sql<{ readonly id: string }>`UPDATE ${table} SET "fingerprint" = ${fingerprint}, "state" = 'in-flight', "owner" = ${owner},
      "status" = NULL, "headers" = NULL, "body" = NULL, "createdAt" = ${now}, "expiresAt" = ${now + leaseMs}
      WHERE "id" = ${id} AND "expiresAt" <= ${now} RETURNING "id"`

  const claim = (scope: Scope, fingerprint: string, leaseMs: number) =>
    Effect.gen(function*() {
      const id = recordId(scope)
      const owner = randomUUID()
      // A record can vanish (released, swept) or lapse between the statements: try again.
      for (let attempt = 0; attempt < 5; attempt++) {
        const now = yield* Clock.currentTimeMillis
        if ((yield* insert(id, scope, fingerprint, owner, now, leaseMs)).length > 0) return Claim.Claimed({ owner })
        const row = yield* read(id)
        if (row === undefined) continue
        if (Number(row.expiresAt) <= now) {
          if ((yield* takeOver(id, fingerprint, owner, now, leaseMs)).length > 0) return Claim.Claimed({ owner })
          continue
        }
        if (row.fingerprint !== fingerprint) return Claim.Mismatch()
        if (row.state !== "completed" || row.status === null) return Claim.InFlight()
        return Claim.Completed({
          response: {
            status: Number(row.status),
            headers: JSON.parse(row.headers ?? "{}") as Record<string, string>,
            body: Buffer.from(row.body ?? "", "base64")
          }
        })
      }
      return Claim.InFlight()
    }).pipe(Effect.mapError(unavailable))

  return IdempotencyStore.of({
    claim,
    renew: (scope, owner, leaseMs) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql<{ readonly id: string }>`UPDATE ${table} SET "expiresAt" = ${now + leaseMs}
          WHERE "id" = ${recordId(scope)} AND "owner" = ${owner} AND "state" = 'in-flight' RETURNING "id"`).pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.mapError(unavailable)
        ),
    complete: (scope, owner, response, ttlMs) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`UPDATE ${table} SET "state" = 'completed', "status" = ${response.status},
          "headers" = ${JSON.stringify(response.headers)}, "body" = ${Buffer.from(response.body).toString("base64")},
          "expiresAt" = ${now + ttlMs}
          WHERE "id" = ${recordId(scope)} AND "owner" = ${owner}`).pipe(Effect.asVoid, Effect.mapError(unavailable)),
    release: (scope, owner) =>
      sql`DELETE FROM ${table} WHERE "id" = ${recordId(scope)} AND "owner" = ${owner}`.pipe(
        Effect.asVoid,
        Effect.mapError(unavailable)
      )
  })
})

/** How often expired records are deleted (SQL tier). */

/**
 * The SQL tier. Creates `_fw_idempotency` when missing (through the schema differ, which never
 * drops anything) and deletes expired records every 10 minutes.
 */
export const layerSql: Layer.Layer<IdempotencyStore, SqlError, SqlClient.SqlClient> = Layer.scoped(
  IdempotencyStore,
  Effect.gen(function*() {
    yield* SchemaDiffer.apply([IdempotencyRecords])
    yield* SqlTier.sweepExpired(IdempotencyRecords.name, "expiresAt", "idempotency")
    return yield* makeSql
  })
)

/**
 * The tier matching the app's store: memory for the memory store, SQL over the `SqlClient` in
 * context for a SQL store (dies with `IdempotencyStoreMissing` when there is none: provide
 * `layerSql` explicitly then).
 */
export const layerFromStore: Layer.Layer<IdempotencyStore, SqlError, Store> = SqlTier.fromStore(layerMemory, layerSql, () =>
  new IdempotencyStoreMissing(
    "idempotency is on over a SQL store, but no SqlClient is in context: provide IdempotencyStore.layerSql"
  ))

export { IdempotencyStoreMissing, IdempotencyUnavailable } from "./Errors.js"
