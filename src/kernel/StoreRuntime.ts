/**
 * `make`: the Store over a Driver. Encodes and decodes rows through the table schema, scopes every
 * operation made for a Subject to its tenant, buffers change events per transaction and hands them
 * to the ChangeTap (staged before the outermost commit, published after it), and records which
 * tables a computation read (for live queries).
 */
import { Chunk, Clock, Effect, FiberRef, Option, ParseResult, Schema, Stream } from "effect"
import type { ChangeTapShape, PendingChange } from "./ChangeTap.js"
import type * as Driver from "./Driver.js"
import { RowInvalid, RowNotFound, TenantViolation, UnknownField } from "./Errors.js"
import type { StoreError } from "./Errors.js"
import * as Provenance from "./Provenance.js"
import type { Condition, FindOptions, Patch, StoreShape, WalkOptions, Where } from "./Store.js"
import * as Subject from "./Subject.js"
import type * as Table from "./Table.js"

/** Changes buffered by the innermost open transaction (`None` outside any transaction). */
const pendingChanges = FiberRef.unsafeMake<Option.Option<Array<PendingChange>>>(Option.none())

/** Tables read while tracking (`None` when nobody tracks). */
const readTables = FiberRef.unsafeMake<Option.Option<Set<string>>>(Option.none())

/** Runs `effect` and returns what it produced with the names of the tables it read. */
export const trackReads = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<[A, ReadonlySet<string>], E, R> =>
  Effect.suspend(() => {
    const tables = new Set<string>()
    return Effect.map(Effect.locally(effect, readTables, Option.some(tables)), (a): [A, ReadonlySet<string>] => [a, tables])
  })

const noteRead = (table: Table.Any) =>
  Effect.map(FiberRef.get(readTables), Option.map((tables) => tables.add(table.name)))

interface Codec {
  readonly encode: (row: unknown) => Effect.Effect<Driver.Encoded, RowInvalid>
  readonly decode: (row: Driver.Encoded) => Effect.Effect<unknown, RowInvalid>
  readonly fields: ReadonlySet<string>
}

const operators = new Set(["eq", "neq", "gt", "gte", "lt", "lte", "in", "nin"])

const isOperatorObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) &&
  Object.keys(value).length > 0 && Object.keys(value).every((key) => operators.has(key))

/** Builds the Store over `driver`, publishing through `tap`. */
export const make = (driver: Driver.Driver, tap: ChangeTapShape): StoreShape => {
  const codecs = new WeakMap<Table.Any, Codec>()
  const codecOf = (table: Table.Any): Codec => {
    let codec = codecs.get(table)
    if (codec === undefined) {
      const encode = Schema.encodeUnknown(table.schema, { errors: "first", onExcessProperty: "error" })
      const decode = Schema.decodeUnknown(table.schema, { onExcessProperty: "ignore" })
      const invalid = (error: ParseResult.ParseError) =>
        new RowInvalid({ table: table.name, message: ParseResult.TreeFormatter.formatErrorSync(error) })
      codec = {
        encode: (row) => Effect.mapError(encode(row), invalid) as Effect.Effect<Driver.Encoded, RowInvalid>,
        decode: (row) => Effect.mapError(decode(row), invalid),
        fields: new Set(["id", ...Object.keys(table.fields)])
      }
      codecs.set(table, codec)
    }
    return codec
  }

  /** The tenant the current fiber is confined to: `undefined` for system code or tenant-less tables. */
  const confinement = (table: Table.Any) =>
    Effect.map(FiberRef.get(Subject.currentSubject), (subject) =>
      table.tenantField === undefined || Option.isNone(subject)
        ? undefined
        : { field: table.tenantField, tenantId: subject.value.tenantId })

  const clausesOf = (table: Table.Any, where: Where<Table.Any> | undefined) =>
    Effect.gen(function*() {
      const codec = codecOf(table)
      const clauses: Array<Driver.Clause> = []
      for (const [field, condition] of Object.entries(where ?? {}) as Array<[string, Condition<unknown>]>) {
        if (!codec.fields.has(field)) return yield* new UnknownField({ table: table.name, field })
        if (condition === undefined) continue
        if (isOperatorObject(condition)) {
          for (const [op, value] of Object.entries(condition)) {
            clauses.push({ field, op: op as Driver.Operator, value })
          }
        } else {
          clauses.push({ field, op: "eq", value: condition })
        }
      }
      const confined = yield* confinement(table)
      if (confined !== undefined) {
        // A tenant-less caller matches nothing in a tenant table.
        clauses.push(
          confined.tenantId === null
            ? { field: "id", op: "in", value: [] }
            : { field: confined.field, op: "eq", value: confined.tenantId }
        )
      }
      return clauses
    })

  // The one boundary where a decoded row takes its table's static type: the codec decoded it with
  // exactly that table's schema.
  const decodeRow = <T extends Table.Any>(table: T, row: Driver.Encoded) =>
    codecOf(table).decode(row) as Effect.Effect<Table.Row<T>, RowInvalid>

  const decodeAll = <T extends Table.Any>(table: T, rows: ReadonlyArray<Driver.Encoded>) =>
    Effect.forEach(rows, (row) => decodeRow(table, row))

  const readEncoded = (table: Table.Any, id: string) =>
    Effect.gen(function*() {
      const where = yield* clausesOf(table, undefined)
      const rows = yield* driver.find(table, { where: [...where, { field: "id", op: "eq", value: id }], orderBy: "id", direction: "asc", limit: 1 })
      return Option.fromNullable(rows[0])
    })

  /** Refuses a write whose row names a tenant other than the caller's. */
  const checkTenant = (table: Table.Any, row: Driver.Encoded) =>
    Effect.gen(function*() {
      const confined = yield* confinement(table)
      if (confined === undefined) return
      if (confined.tenantId === null) {
        return yield* new TenantViolation({ table: table.name, message: "a caller without a tenant cannot write a tenant table" })
      }
      if (row[confined.field] !== confined.tenantId) {
        return yield* new TenantViolation({
          table: table.name,
          message: `the row names tenant "${String(row[confined.field])}", the caller acts in tenant "${confined.tenantId}"`
        })
      }
    })

  const tenantOf = (table: Table.Any, row: Driver.Encoded | null) =>
    table.tenantField === undefined || row === null ? null : (row[table.tenantField] as string | null) ?? null

  const record = (table: Table.Any, op: PendingChange["op"], id: string, before: Driver.Encoded | null, after: Driver.Encoded | null) =>
    Effect.gen(function*() {
      const buffer = yield* FiberRef.get(pendingChanges)
      if (Option.isNone(buffer)) return yield* Effect.dieMessage("a store write ran outside its transaction")
      buffer.value.push({
        table: table.name,
        op,
        id,
        tenantId: tenantOf(table, after ?? before),
        before,
        after,
        at: yield* Clock.currentTimeMillis,
        provenance: yield* FiberRef.get(Provenance.current)
      })
    })

  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> =>
    Effect.flatMap(FiberRef.get(pendingChanges), (outer) => {
      const own: Array<PendingChange> = []
      const body = Effect.locally(effect, pendingChanges, Option.some(own))
      if (Option.isSome(outer)) {
        // A savepoint: its changes join the enclosing transaction only if it commits.
        return Effect.map(driver.transaction(body), (a) => {
          outer.value.push(...own)
          return a
        })
      }
      return driver.transaction(Effect.tap(body, () => own.length > 0 ? tap.stage(own) : Effect.void)).pipe(
        Effect.tap(() => own.length > 0 ? tap.publish(own) : Effect.void)
      )
    })

  const write = <A, E, R>(effect: Effect.Effect<A, E, R>) => transaction(effect)

  /**
   * A write that is one statement: outside a transaction, on a tier where a statement is atomic and
   * with nothing to stage before commit, it runs without BEGIN/COMMIT round trips.
   */
  const writeOne = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> =>
    Effect.flatMap(FiberRef.get(pendingChanges), (outer) => {
      if (Option.isSome(outer) || !driver.atomicStatements || tap.scope !== "local") return transaction(effect)
      const own: Array<PendingChange> = []
      return Effect.locally(effect, pendingChanges, Option.some(own)).pipe(
        Effect.tap(() => own.length > 0 ? tap.publish(own) : Effect.void)
      )
    })

  const newId = () => crypto.randomUUID()

  const store: StoreShape = {
    dialect: driver.dialect,
    transaction,
    insert: <T extends Table.Any>(table: T, row: Table.Insert<T>) =>
      writeOne(Effect.gen(function*() {
        const encoded = yield* codecOf(table).encode({ ...row, id: row.id ?? newId() })
        yield* checkTenant(table, encoded)
        yield* driver.insert(table, [encoded])
        yield* record(table, "insert", encoded.id as string, null, encoded)
        return yield* decodeRow(table, encoded)
      })),
    insertMany: <T extends Table.Any>(table: T, rows: ReadonlyArray<Table.Insert<T>>) =>
      write(Effect.gen(function*() {
        const encoded = yield* Effect.forEach(rows, (row) => codecOf(table).encode({ ...row, id: row.id ?? newId() }))
        for (const row of encoded) yield* checkTenant(table, row)
        const batch = 500
        for (let i = 0; i < encoded.length; i += batch) yield* driver.insert(table, encoded.slice(i, i + batch))
        for (const row of encoded) yield* record(table, "insert", row.id as string, null, row)
        return yield* decodeAll(table, encoded)
      })),
    update: <T extends Table.Any>(table: T, id: string, patch: Patch<T>) =>
      write(Effect.gen(function*() {
        const before = yield* readEncoded(table, id)
        if (Option.isNone(before)) return yield* new RowNotFound({ table: table.name, id })
        const current = yield* decodeRow(table, before.value)
        const encoded = yield* codecOf(table).encode({ ...current, ...patch, id })
        yield* checkTenant(table, encoded)
        yield* driver.replace(table, encoded)
        yield* record(table, "update", id, before.value, encoded)
        return yield* decodeRow(table, encoded)
      })),
    upsert: <T extends Table.Any>(table: T, row: Table.Row<T>) =>
      write(Effect.gen(function*() {
        const encoded = yield* codecOf(table).encode(row)
        yield* checkTenant(table, encoded)
        const id = encoded.id as string
        const before = yield* readEncoded(table, id)
        if (Option.isSome(before)) {
          yield* driver.replace(table, encoded)
          yield* record(table, "update", id, before.value, encoded)
        } else {
          // Invisible to this caller but present (another tenant's row) is a duplicate, never an overwrite.
          yield* driver.insert(table, [encoded])
          yield* record(table, "insert", id, null, encoded)
        }
        return yield* decodeRow(table, encoded)
      })),
    delete: (table, id) =>
      write(Effect.gen(function*() {
        const before = yield* readEncoded(table, id)
        if (Option.isNone(before)) return yield* new RowNotFound({ table: table.name, id })
        yield* driver.remove(table, id)
        yield* record(table, "delete", id, before.value, null)
      })),
    get: <T extends Table.Any>(table: T, id: string) =>
      Effect.gen(function*() {
        yield* noteRead(table)
        const row = yield* readEncoded(table, id)
        return Option.isNone(row) ? Option.none<Table.Row<T>>() : Option.some(yield* decodeRow(table, row.value))
      }),
    find: <T extends Table.Any>(table: T, options: FindOptions<T> = {}) =>
      Effect.gen(function*() {
        yield* noteRead(table)
        const where = yield* clausesOf(table, options.where)
        const orderBy = options.orderBy ?? "id"
        if (!codecOf(table).fields.has(orderBy)) return yield* new UnknownField({ table: table.name, field: orderBy })
        const rows = yield* driver.find(table, {
          where,
          orderBy,
          direction: options.direction ?? "asc",
          limit: options.limit,
          offset: options.offset
        })
        return yield* decodeAll(table, rows)
      }),
    count: (table, options = {}) =>
      Effect.gen(function*() {
        yield* noteRead(table)
        return yield* driver.count(table, yield* clausesOf(table, options.where))
      }),
    walk: <T extends Table.Any>(table: T, options: WalkOptions<T> = {}) => {
      const pageSize = Math.max(1, options.pageSize ?? 1000)
      return Stream.paginateChunkEffect(null as string | null, (after) =>
        Effect.gen(function*() {
          yield* noteRead(table)
          const where = yield* clausesOf(table, options.where)
          const rows = yield* driver.find(table, {
            where: after === null ? where : [...where, { field: "id", op: "gt", value: after }],
            orderBy: "id",
            direction: "asc",
            limit: pageSize
          })
          const decoded = yield* decodeAll(table, rows)
          const last = rows.length === pageSize ? Option.some(rows[rows.length - 1]!.id as string) : Option.none()
          return [decoded, last] as const
        }).pipe(Effect.map(([decoded, last]) => [Chunk.unsafeFromArray(decoded), last] as const))
      )
    }
  }
  return store
}
