/**
 * Where aggregate rows, metadata and incremental state live: in process (`memory`) or in the
 * `_fw_aggregate_meta` / `_fw_aggregate_rows` tables (SQLite, PostgreSQL).
 *
 * Atomic swap on SQL: a `replace` writes its rows under generation g+1 and switches the meta row to
 * g+1 in the same transaction; readers read rows joined to the meta row's generation in one
 * statement, so they see the old set or the new one, never a mix.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { StoreUnavailable } from "../kernel/Errors.js"
import { indexName } from "../kernel/schema/SchemaDiffer.js"
import { unavailable } from "../kernel/drivers/sql/SqlDriver.js"

/** The stored metadata of one aggregate. */
export interface StoredMeta {
  readonly generation: number
  readonly refreshedAt: number | null
  readonly rowCount: number
  readonly durationMs: number | null
  readonly lastError: string | null
  readonly ready: boolean
}

/** The maintained state of one group of an incremental aggregate. */
export interface GroupState {
  /** The group's values as JSON (`[]` without groupBy). */
  readonly key: string
  readonly group: Readonly<Record<string, unknown>>
  /** Rows in the group. */
  readonly n: number
  /** Rows with a non-null value. */
  readonly c: number
  /** Sum of the values. */
  readonly s: number
  /** The extreme (min or max), null with no values. */
  readonly v: number | null
}

/** The storage operations. Every SQL failure is `StoreUnavailable`. */
export interface StorageShape {
  readonly tier: "memory" | "sqlite" | "pg"
  /** Creates the meta row when absent. */
  readonly ensure: (name: string) => Effect.Effect<void, StoreUnavailable>
  /**
   * Makes the aggregate's B-tree indexes over its output columns exactly the declared ones
   * (creates the missing, drops those no longer declared); a no-op in memory.
   */
  readonly indexes: (name: string, indexes: ReadonlyArray<ReadonlyArray<string>>) => Effect.Effect<void, StoreUnavailable>
  readonly meta: (name: string) => Effect.Effect<StoredMeta, StoreUnavailable>
  /** The current generation's encoded rows, in build order (merge: mergeKey order). */
  readonly rows: (name: string) => Effect.Effect<ReadonlyArray<unknown>, StoreUnavailable>
  /** Forgets rows, state and refresh metadata (`bootRefresh: async`). */
  readonly reset: (name: string) => Effect.Effect<void, StoreUnavailable>
  /** Swaps in a full set atomically and clears `lastError`. */
  readonly replace: (name: string, rows: ReadonlyArray<unknown>, at: number, durationMs: number) => Effect.Effect<void, StoreUnavailable>
  /** Upserts rows by key, keeping rows not returned, and clears `lastError`. */
  readonly merge: (
    name: string,
    rows: ReadonlyArray<{ readonly key: string; readonly row: unknown }>,
    at: number,
    durationMs: number
  ) => Effect.Effect<void, StoreUnavailable>
  /** Records a failed refresh; rows are kept. */
  readonly fail: (name: string, message: string) => Effect.Effect<void, StoreUnavailable>
  /** Claims a scheduled trigger (its slot, epoch ms): true for the one replica that gets it. */
  readonly claimSlot: (name: string, slot: number) => Effect.Effect<boolean, StoreUnavailable>
  /** Claims an on-change refresh for a change committed at `changeAt`: false when a refresh started since. */
  readonly claimChange: (name: string, changeAt: number, now: number) => Effect.Effect<boolean, StoreUnavailable>
  /** The groups of an incremental aggregate. */
  readonly groups: (name: string) => Effect.Effect<ReadonlyArray<GroupState>, StoreUnavailable>
  /** Replaces all groups (a full rebuild) and marks the state ready. */
  readonly rebuild: (name: string, groups: ReadonlyArray<GroupState>, at: number, durationMs: number) => Effect.Effect<void, StoreUnavailable>
}

/**
 * The memory tier's storage, with the delta operations its ChangeTap stager applies inside the
 * writing transaction. The SQL tiers have none: their database triggers apply deltas (`Triggers`).
 */
export interface MemoryStorageShape extends StorageShape {
  /** Adds to a group's counters (count, sum, avg). */
  readonly add: (name: string, key: string, group: Readonly<Record<string, unknown>>, dn: number, dc: number, ds: number) => Effect.Effect<void>
  /**
   * min/max: adds `dn` and `dc`, and takes `value` as the extreme when it beats the current one (or
   * there is none); the extreme is null when the group has no values left. Returns the new state:
   * when a removed value was the extreme, the caller rescans and writes it with `setExtreme`.
   */
  readonly extreme: (
    name: string,
    key: string,
    group: Readonly<Record<string, unknown>>,
    op: "min" | "max",
    dn: number,
    dc: number,
    value: number | null
  ) => Effect.Effect<GroupState>
  /** Writes a group's extreme. */
  readonly setExtreme: (name: string, key: string, v: number | null) => Effect.Effect<void>
}

const emptyMeta: StoredMeta = { generation: 1, refreshedAt: null, rowCount: 0, durationMs: null, lastError: null, ready: false }

/** In-process storage (dev and tests; one process). */
export const makeMemory = (): MemoryStorageShape => {
  const metas = new Map<string, StoredMeta>()
  const sets = new Map<string, Map<string, unknown>>()
  const states = new Map<string, Map<string, GroupState>>()
  const slots = new Map<string, number>()
  const claims = new Map<string, number>()
  const metaOf = (name: string) => metas.get(name) ?? emptyMeta
  const setOf = (name: string) => {
    let set = sets.get(name)
    if (set === undefined) sets.set(name, set = new Map())
    return set
  }
  const stateOf = (name: string) => {
    let state = states.get(name)
    if (state === undefined) states.set(name, state = new Map())
    return state
  }
  return {
    tier: "memory",
    ensure: (name) => Effect.sync(() => void (metas.has(name) || metas.set(name, emptyMeta))),
    indexes: () => Effect.void,
    meta: (name) => Effect.sync(() => metaOf(name)),
    rows: (name) => Effect.sync(() => [...(sets.get(name)?.values() ?? [])]),
    reset: (name) =>
      Effect.sync(() => {
        sets.delete(name)
        states.delete(name)
        metas.set(name, { ...emptyMeta, generation: metaOf(name).generation + 1 })
      }),
    replace: (name, rows, at, durationMs) =>
      Effect.sync(() => {
        sets.set(name, new Map(rows.map((row, i) => [String(i), row])))
        metas.set(name, { ...metaOf(name), generation: metaOf(name).generation + 1, refreshedAt: at, rowCount: rows.length, durationMs, lastError: null })
      }),
    merge: (name, rows, at, durationMs) =>
      Effect.sync(() => {
        const set = setOf(name)
        for (const { key, row } of rows) set.set(key, row)
        const sorted = new Map([...set.entries()].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0))
        sets.set(name, sorted)
        metas.set(name, { ...metaOf(name), refreshedAt: at, rowCount: sorted.size, durationMs, lastError: null })
      }),
    fail: (name, message) => Effect.sync(() => void metas.set(name, { ...metaOf(name), lastError: message })),
    claimSlot: (name, slot) =>
      Effect.sync(() => {
        if ((slots.get(name) ?? -Infinity) >= slot) return false
        slots.set(name, slot)
        return true
      }),
    claimChange: (name, changeAt, now) =>
      Effect.sync(() => {
        if ((claims.get(name) ?? -Infinity) >= changeAt) return false
        claims.set(name, now)
        return true
      }),
    groups: (name) => Effect.sync(() => [...stateOf(name).values()].sort((a, b) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
    rebuild: (name, groups, at, durationMs) =>
      Effect.sync(() => {
        states.set(name, new Map(groups.map((g) => [g.key, g])))
        metas.set(name, { ...metaOf(name), refreshedAt: at, durationMs, lastError: null, ready: true, rowCount: groups.length })
      }),
    add: (name, key, group, dn, dc, ds) =>
      Effect.sync(() => {
        const state = stateOf(name)
        const old = state.get(key) ?? { key, group, n: 0, c: 0, s: 0, v: null }
        state.set(key, { ...old, n: old.n + dn, c: old.c + dc, s: old.s + ds })
      }),
    extreme: (name, key, group, op, dn, dc, value) =>
      Effect.sync(() => {
        const state = stateOf(name)
        const old = state.get(key) ?? { key, group, n: 0, c: 0, s: 0, v: null }
        const c = old.c + dc
        const beats = value !== null && (old.v === null || (op === "min" ? value < old.v : value > old.v))
        const next = { ...old, n: old.n + dn, c, v: c === 0 ? null : beats ? value : old.v }
        state.set(key, next)
        return next
      }),
    setExtreme: (name, key, v) =>
      Effect.sync(() => {
        const state = stateOf(name)
        const old = state.get(key)
        if (old !== undefined) state.set(key, { ...old, v })
      })
  }
}

const num = (value: unknown): number | null => value === null || value === undefined ? null : Number(value)

/** The name of an aggregate's index over `columns` (the aggregate's name is part of it). */
export const outputIndexName = (name: string, columns: ReadonlyArray<string>) => indexName(`_fw_agg_${name}`, columns)

/** Storage in `_fw_aggregate_meta` / `_fw_aggregate_rows` (created by the schema differ). */
export const makeSql: Effect.Effect<StorageShape, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const tier = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })
  const bool = (b: boolean) => tier === "sqlite" ? (b ? 1 : 0) : b
  const json = (value: unknown) => JSON.stringify(value)
  const parse = (value: unknown) => typeof value === "string" && tier === "sqlite" ? JSON.parse(value) : value
  const forUpdate = sql.literal(tier === "pg" ? "FOR UPDATE" : "")
  const fail = <A>(effect: Effect.Effect<A, SqlError>) => Effect.mapError(effect, unavailable)
  const tx = <A>(effect: Effect.Effect<A, SqlError>) => fail(sql.withTransaction(effect))
  const stateId = (name: string, key: string) => `${name}|i|${key}`

  const readMeta = (name: string) =>
    Effect.map(
      sql<Record<string, unknown>>`SELECT * FROM _fw_aggregate_meta WHERE id = ${name}`,
      ([row]): StoredMeta =>
        row === undefined ? emptyMeta : {
          generation: Number(row.generation),
          refreshedAt: num(row.refreshedAt),
          rowCount: Number(row.rowCount),
          durationMs: num(row.durationMs),
          lastError: (row.lastError as string | null) ?? null,
          ready: row.ready === true || row.ready === 1
        }
    )

  const insertRows = (records: ReadonlyArray<Record<string, unknown>>) =>
    Effect.forEach(
      Array.from({ length: Math.ceil(records.length / 500) }, (_, i) => records.slice(i * 500, i * 500 + 500)),
      (chunk) => sql`INSERT INTO _fw_aggregate_rows ${sql.insert(chunk)}`,
      { discard: true }
    )

  const toState = (row: Record<string, unknown>): GroupState => ({
    key: row.key as string,
    group: parse(row.row) as Record<string, unknown>,
    n: Number(row.n ?? 0),
    c: Number(row.c ?? 0),
    s: Number(row.s ?? 0),
    v: num(row.v)
  })

  const storage: StorageShape = {
    tier,
    ensure: (name) =>
      fail(sql`INSERT INTO _fw_aggregate_meta ${
        sql.insert({ id: name, generation: 1, refreshedAt: null, rowCount: 0, durationMs: null, lastError: null, lastSlot: null, claimedAt: null, ready: bool(false) })
      } ON CONFLICT (id) DO NOTHING`.pipe(Effect.asVoid)),
    indexes: (name, indexes) =>
      tx(Effect.gen(function*() {
        // Replicas booting together: one at a time (DDL on the same names would race in the catalog).
        if (tier === "pg") yield* sql`SELECT pg_advisory_xact_lock(hashtext('_fw_aggregate_rows indexes'))`
        // Partial expression indexes: rows of one aggregate, generation first (reads are of one
        // generation), then the declared output columns as stored (JSON). The aggregate's name and
        // the columns were checked to be identifiers at definition, so they are written inline.
        const wanted = new Map(indexes.map((columns) => [outputIndexName(name, columns), columns]))
        const existing = tier === "pg"
          ? yield* sql<{ readonly name: string; readonly definition: string }>`SELECT indexname AS name, indexdef AS definition
            FROM pg_indexes WHERE tablename = '_fw_aggregate_rows'`
          : yield* sql<{ readonly name: string; readonly definition: string | null }>`SELECT name, sql AS definition FROM sqlite_master
            WHERE type = 'index' AND tbl_name = '_fw_aggregate_rows'`
        for (const index of existing) {
          const mine = index.name.startsWith("_fw_agg_") && (index.definition ?? "").includes(`'${name}'`)
          if (mine && !wanted.has(index.name)) yield* sql.unsafe(`DROP INDEX IF EXISTS "${index.name}"`)
        }
        for (const [index, columns] of wanted) {
          const expressions = columns.map((column) => tier === "pg" ? `(row -> '${column}')` : `json_extract(row, '$.${column}')`)
          yield* sql.unsafe(`CREATE INDEX IF NOT EXISTS "${index}" ON _fw_aggregate_rows (generation, ${expressions.join(", ")})
            WHERE aggregate = '${name}'`)
        }
      })),
    meta: (name) => fail(readMeta(name)),
    rows: (name) =>
      fail(sql<{ readonly row: unknown }>`SELECT r.row FROM _fw_aggregate_rows r JOIN _fw_aggregate_meta m
        ON m.id = r.aggregate AND m.generation = r.generation WHERE m.id = ${name} ORDER BY r.key`.pipe(
        Effect.map((rows) => rows.map((r) => parse(r.row)))
      )),
    reset: (name) =>
      tx(Effect.gen(function*() {
        yield* sql`DELETE FROM _fw_aggregate_rows WHERE aggregate = ${name}`
        yield* sql`UPDATE _fw_aggregate_meta SET generation = generation + 1, "refreshedAt" = NULL, "rowCount" = 0,
          "durationMs" = NULL, "lastError" = NULL, ready = ${bool(false)} WHERE id = ${name}`
      })),
    replace: (name, rows, at, durationMs) =>
      tx(Effect.gen(function*() {
        const [current] = yield* sql<{ readonly generation: number }>`SELECT generation FROM _fw_aggregate_meta WHERE id = ${name} ${forUpdate}`
        const generation = Number(current?.generation ?? 1) + 1
        yield* insertRows(rows.map((row, i) => {
          const key = String(i).padStart(10, "0")
          return { id: `${name}|${generation}|${key}`, aggregate: name, generation, key, row: json(row), n: null, c: null, s: null, v: null }
        }))
        yield* sql`UPDATE _fw_aggregate_meta SET generation = ${generation}, "refreshedAt" = ${at}, "rowCount" = ${rows.length},
          "durationMs" = ${durationMs}, "lastError" = NULL WHERE id = ${name}`
        yield* sql`DELETE FROM _fw_aggregate_rows WHERE aggregate = ${name} AND generation <> ${generation}`
      })),
    merge: (name, rows, at, durationMs) =>
      tx(Effect.gen(function*() {
        const [current] = yield* sql<{ readonly generation: number }>`SELECT generation FROM _fw_aggregate_meta WHERE id = ${name} ${forUpdate}`
        const generation = Number(current?.generation ?? 1)
        for (let i = 0; i < rows.length; i += 500) {
          const chunk = rows.slice(i, i + 500).map(({ key, row }) => ({
            id: `${name}|${generation}|${key}`, aggregate: name, generation, key, row: json(row), n: null, c: null, s: null, v: null
          }))
          yield* sql`INSERT INTO _fw_aggregate_rows ${sql.insert(chunk)} ON CONFLICT (id) DO UPDATE SET row = excluded.row`
        }
        const [count] = yield* sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM _fw_aggregate_rows
          WHERE aggregate = ${name} AND generation = ${generation}`
        yield* sql`UPDATE _fw_aggregate_meta SET "refreshedAt" = ${at}, "rowCount" = ${Number(count?.n ?? 0)},
          "durationMs" = ${durationMs}, "lastError" = NULL WHERE id = ${name}`
      })),
    fail: (name, message) => fail(sql`UPDATE _fw_aggregate_meta SET "lastError" = ${message} WHERE id = ${name}`.pipe(Effect.asVoid)),
    claimSlot: (name, slot) =>
      fail(sql<{ readonly id: string }>`UPDATE _fw_aggregate_meta SET "lastSlot" = ${slot}
        WHERE id = ${name} AND ("lastSlot" IS NULL OR "lastSlot" < ${slot}) RETURNING id`.pipe(Effect.map((rows) => rows.length === 1))),
    claimChange: (name, changeAt, now) =>
      fail(sql<{ readonly id: string }>`UPDATE _fw_aggregate_meta SET "claimedAt" = ${now}
        WHERE id = ${name} AND ("claimedAt" IS NULL OR "claimedAt" < ${changeAt}) RETURNING id`.pipe(Effect.map((rows) => rows.length === 1))),
    groups: (name) =>
      fail(sql<Record<string, unknown>>`SELECT key, row, n, c, s, v FROM _fw_aggregate_rows WHERE aggregate = ${name} AND generation = 0 ORDER BY key`
        .pipe(Effect.map((rows) => rows.map(toState)))),
    rebuild: (name, groups, at, durationMs) =>
      tx(Effect.gen(function*() {
        yield* sql`DELETE FROM _fw_aggregate_rows WHERE aggregate = ${name} AND generation = 0`
        yield* insertRows(groups.map((g) => ({ id: stateId(name, g.key), aggregate: name, generation: 0, key: g.key, row: json(g.group), n: g.n, c: g.c, s: g.s, v: g.v })))
        yield* sql`UPDATE _fw_aggregate_meta SET "refreshedAt" = ${at}, "rowCount" = ${groups.length}, "durationMs" = ${durationMs},
          "lastError" = NULL, ready = ${bool(true)} WHERE id = ${name}`
      }))
  }
  return storage
})
