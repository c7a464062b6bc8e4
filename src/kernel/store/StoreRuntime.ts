/**
 * `make`: the Store over a Driver, implemented once for every tier. It encodes and decodes rows
 * through the table schema, scopes every operation made for a Subject to its tenant, buffers change
 * events per transaction and hands them to the ChangeTap (staged inside the outermost transaction
 * just before commit, published after it), and records which tables a computation read.
 */
import { Chunk, Clock, Context, Effect, Either, Exit, Fiber, FiberRef, Option, Stream } from "effect"
import { ChangeTap } from "../changes/ChangeTap.js"
import type { ChangeTapShape, PendingChange } from "../changes/ChangeTap.js"
import * as Driver from "./Driver.js"
import * as CommitWitness from "./CommitWitness.js"
import { CommitUnknown, DuplicateRow, RowNotFound } from "../Errors.js"
import type { StoreError } from "../Errors.js"
import * as Provenance from "../changes/Provenance.js"
import * as Telemetry from "../Telemetry.js"
import { noteRead } from "../changes/ReadTracking.js"
import * as RowCodec from "../schema/RowCodec.js"
import type { StoreShape } from "./StoreShape.js"
import * as Subject from "../Subject.js"
import * as StagedInsert from "./StagedInsert.js"
import * as StorePointRead from "./StorePointRead.js"
import { inSpan, traced } from "./StoreSpan.js"
import { clausesOf, decodeAll, queryOf, wholeNumber } from "./StoreQuery.js"
import type * as Table from "../schema/Table.js"
import * as TenantScope from "./TenantScope.js"

/** System code's scope: every tenant's rows. */
const unscoped: TenantScope.Scope = { _tag: "Unscoped" }

/** A COMMIT whose outcome is unknown: it may have committed, so a witness must count it. */
const isCommitUnknown = (error: unknown): error is CommitUnknown => error instanceof CommitUnknown

const idOf = (row: Driver.Encoded): string => row.id as string

/** This process's prefix of change refs (random), and a counter after it: unique across processes. */
const refPrefix = crypto.randomUUID().slice(0, 13)
let refCounter = 0
const nextRef = () => `${refPrefix}:${(++refCounter).toString(36)}`

/** Builds the Store over `driver`, with the ChangeTap of the context. */
export const make = (driver: Driver.Driver): Effect.Effect<StoreShape, never, ChangeTap> =>
  Effect.map(ChangeTap, (tap) => build(driver, tap))

const build = (driver: Driver.Driver, tap: ChangeTapShape): StoreShape => {
  /** Changes buffered by the innermost open transaction of this store (`undefined` outside one). */
  const buffer = FiberRef.unsafeMake<Array<PendingChange> | undefined>(undefined)

  const publish = (changes: ReadonlyArray<PendingChange>) => changes.length === 0 ? Effect.void : tap.publish(changes)
  /**
   * Inside the outermost transaction, just before commit: the stagers (their writes join the
   * transaction, under the row locks its writes took, and are not change events), then the tap.
   */
  const stage = (changes: ReadonlyArray<PendingChange>): Effect.Effect<void, StoreError> => {
    if (changes.length === 0) return Effect.void
    const stagers = tap.stagers()
    if (stagers.length === 0) return tap.stage(changes)
    return Effect.zipRight(
      // Stagers are system code, like listeners: they act across tenants, whoever made the write.
      Subject.asSystem(Effect.forEach(stagers, (stager) => stager.stage(changes), { discard: true })).pipe(
        Effect.locally(buffer, [])
      ),
      tap.stage(changes)
    )
  }

  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> =>
    Effect.flatMap(FiberRef.get(buffer), (outer) => {
      const own: Array<PendingChange> = []
      const body = Effect.locally(effect, buffer, own)
      if (outer !== undefined) {
        // A savepoint: its changes join the enclosing transaction only if it commits.
        return Effect.map(driver.transaction(body), (a) => {
          for (const change of own) outer.push(change)
          return a
        })
      }
      // Once committed, the changes are delivered even if the caller is interrupted meanwhile (a
      // request timeout, a client that went away): listeners such as row history must not miss them.
      return Effect.uninterruptibleMask((restore) =>
        restore(driver.transaction(Effect.tap(body, () => stage(own)))).pipe(
          Effect.tapError((error) =>
            isCommitUnknown(error)
              ? Effect.zipRight(CommitWitness.mark, tap.commitUnknown === undefined ? Effect.void : tap.commitUnknown(own))
              : Effect.void
          ),
          Effect.tap(() => own.length === 0 ? Effect.void : Effect.zipRight(CommitWitness.mark, publish(own)))
        )
      )
    })

  /** A write of several statements: inside the caller's transaction, else in its own. */
  const atomically = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> =>
    Effect.flatMap(FiberRef.get(buffer), (outer) => outer !== undefined ? effect : transaction(effect))

  /**
   * A write of one statement. Outside a transaction it needs no BEGIN/COMMIT (every tier runs a
   * statement atomically) when staging does nothing (local scope, no stagers), so stage and publish
   * follow the statement directly; under fleet scope or with stagers, staging must commit with the write.
   */
  const single = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> =>
    Effect.flatMap(FiberRef.get(buffer), (outer) => {
      if (outer !== undefined) return effect
      if (tap.scope !== "local" || tap.stagers().length > 0) return transaction(effect)
      const own: Array<PendingChange> = []
      return Effect.uninterruptibleMask((restore) =>
        restore(Effect.locally(effect, buffer, own)).pipe(
          // An autocommitted statement whose outcome is unknown may have committed (see `Driver.insert`).
          Effect.tapError((error) => isCommitUnknown(error) ? CommitWitness.mark : Effect.void),
          Effect.tap(() =>
            own.length === 0 ? Effect.void : Effect.zipRight(CommitWitness.mark, Effect.zipRight(stage(own), publish(own)))
          )
        )
      )
    })

  const record = (
    table: Table.Any,
    op: PendingChange["op"],
    rows: ReadonlyArray<{ readonly before: Driver.Encoded | null; readonly after: Driver.Encoded | null }>
  ) =>
    Effect.gen(function*() {
      const changes = yield* FiberRef.get(buffer)
      if (changes === undefined) return yield* Effect.dieMessage("a store write ran outside its transaction")
      const at = yield* Clock.currentTimeMillis
      const provenance = yield* FiberRef.get(Provenance.current)
      for (const { after, before } of rows) {
        const row = (after ?? before)!
        changes.push({ table: table.name, op, id: idOf(row), tenantId: TenantScope.tenantOf(table, row), before, after, at, provenance, ref: nextRef() })
      }
    })

  const { get, visible } = StorePointRead.make(driver)

  const existing = (table: Table.Any, id: string) =>
    Effect.flatMap(visible(table, id, true), (row) =>
      Option.isSome(row)
        ? Effect.succeed(row.value)
        // A caller's megabyte-long id is not echoed back whole.
        : Effect.fail(new RowNotFound({ table: table.name, id: id.length > RowCodec.maxIdLength ? `${id.slice(0, 64)}…` : id })))

  const encodeNew = (table: Table.Any, row: Readonly<Record<string, unknown>>) =>
    RowCodec.of(table).encode(row.id === undefined ? { ...row, id: crypto.randomUUID() } : row)

  const insertAsync = (table: Table.Any, row: Readonly<Record<string, unknown>>) =>
    single(Effect.gen(function*() {
      const encoded = yield* encodeNew(table, row)
      yield* TenantScope.checkWrite(table, yield* TenantScope.of(table), encoded)
      yield* driver.insert(table, [encoded])
      yield* record(table, "insert", [{ before: null, after: encoded }])
      return yield* RowCodec.of(table).decode(encoded)
    }))

  const insertNow = driver.insertNow
  const insertSend = driver.insertSend
  /**
   * A one-row insert on a tier that writes synchronously (`insertNow`): encoded, scoped, written
   * and recorded in one fiber step; outside a transaction the change is then staged and published
   * as `single` does. On a tier that answers from a server (`insertSend`) the same, the write sent
   * from one `Effect.async` and the rest done in the tier's callback, so the fiber resumes once.
   * Uninterruptible from the write to the publication, so a committed row is never left
   * unannounced; whatever cannot be done that way takes `insertAsync`. The mask's body runs in the
   * fiber's step, so the fiber is at hand (`Fiber.getCurrentFiber`) without a step of its own.
   */
  const insert = (table: Table.Any, row: Readonly<Record<string, unknown>>) =>
    insertNow === undefined && insertSend === undefined
      ? traced("insert", insertAsync)(table, row)
      : Effect.uninterruptibleMask((restore): Effect.Effect<unknown, StoreError> => {
        const fiber = Option.getOrUndefined(Fiber.getCurrentFiber())
        if (fiber === undefined) return restore(traced("insert", insertAsync)(table, row))
        if (Telemetry.isInstalled(fiber.currentTracer)) return restore(inSpan("insert", table, insertAsync(table, row)))
        const own = fiber.getFiberRef(buffer)
        if (own === undefined && (tap.scope !== "local" || tap.stagers().length > 0)) {
          return staged.insertNow(fiber, table, row, () => restore(insertAsync(table, row))) ?? restore(insertAsync(table, row))
        }
        const encoded = encodeNew(table, row)
        if (Either.isLeft(encoded)) return Exit.fail(encoded.left)
        const after = encoded.right
        const refused = TenantScope.violation(table, TenantScope.ofFiber(fiber, table), after)
        if (refused !== undefined) return Exit.fail(refused)
        if (insertSend !== undefined) {
          // A server round trip (PostgreSQL): awaited without interruption, so a written row is announced.
          return Effect.async<unknown, StoreError>((resume) => {
            const sent = insertSend(table, after, fiber, (written) => {
              try {
                resume(
                  written === undefined
                    ? inserted(fiber, own, table, after)
                    : isCommitUnknown(written)
                    ? insertUnknown(fiber, table, after, written)
                    : Exit.fail(written)
                )
              } catch (defect) {
                resume(Effect.die(defect))
              }
            })
            if (!sent) resume(restore(insertAsync(table, row)))
          })
        }
        const outcome = insertNow!(table, after, fiber)
        if (outcome === Driver.NotNow) return restore(insertAsync(table, row))
        if (outcome !== undefined) return Exit.fail(outcome)
        return inserted(fiber, own, table, after)
      })

  /**
   * An autocommitted one-row insert whose outcome is unknown (its connection failed before the
   * answer): it may have committed, so the commit witness is marked (the idempotency binding must
   * not let a retry write again) and the tap told, as for a transaction's unknown COMMIT.
   */
  const insertUnknown = (
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    table: Table.Any,
    after: Driver.Encoded,
    error: CommitUnknown
  ): Effect.Effect<never, CommitUnknown> => {
    CommitWitness.markIn(fiber)
    return tap.commitUnknown === undefined
      ? Exit.fail(error)
      : Effect.zipRight(tap.commitUnknown([insertedChange(fiber, table, after)]), Exit.fail(error))
  }

  /** The change a one-row insert written synchronously by `fiber` makes. */
  const insertedChange = (fiber: Fiber.RuntimeFiber<unknown, unknown>, table: Table.Any, after: Driver.Encoded): PendingChange => ({
    table: table.name,
    op: "insert",
    id: idOf(after),
    tenantId: TenantScope.tenantOf(table, after),
    before: null,
    after,
    at: Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeMillis(),
    provenance: fiber.getFiberRef(Provenance.current),
    // Stagers name their work by it (inside a transaction too: its stagers run at its commit).
    ref: nextRef()
  })

  /** The rest of an `insertNow` once the row is written: recorded, or staged and published. */
  const inserted = (
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    own: Array<PendingChange> | undefined,
    table: Table.Any,
    after: Driver.Encoded
  ): Effect.Effect<unknown, StoreError> => {
    const change = insertedChange(fiber, table, after)
    const decoded = RowCodec.of(table).decode(after)
    if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
    if (own !== undefined) {
      own.push(change)
      return Effect.succeed(decoded.right)
    }
    CommitWitness.markIn(fiber)
    const changes = [change]
    // Staging that does nothing (a local tap without stagers) costs no step.
    const staging = stage(changes)
    return Effect.as(staging === Effect.void ? publish(changes) : Effect.zipRight(staging, publish(changes)), decoded.right)
  }

  /** One-row inserts with stagers committed in one step where the tier can (see StagedInsert). */
  const staged = StagedInsert.make({
    driver,
    tap,
    encodeNew,
    insertedChange,
    publish,
    queryOf: (table, options) => queryOf(table, options, unscoped),
    decodeAll
  })

  const insertMany = (table: Table.Any, rows: ReadonlyArray<Readonly<Record<string, unknown>>>) =>
    rows.length === 0 ? Effect.succeed([]) : transaction(Effect.gen(function*() {
      const scope = yield* TenantScope.of(table)
      const encoded: Array<Driver.Encoded> = []
      for (const row of rows) {
        const one = yield* encodeNew(table, row)
        yield* TenantScope.checkWrite(table, scope, one)
        encoded.push(one)
      }
      yield* driver.insert(table, encoded)
      yield* record(table, "insert", encoded.map((after) => ({ before: null, after })))
      return yield* decodeAll(table, encoded)
    }))

  const update = (table: Table.Any, id: string, patch: Readonly<Record<string, unknown>>) =>
    atomically(Effect.gen(function*() {
      const codec = RowCodec.of(table)
      const before = yield* existing(table, id)
      const current = yield* codec.decode(before)
      const encoded = yield* codec.encode({ ...(current as object), ...patch, id })
      yield* TenantScope.checkWrite(table, yield* TenantScope.of(table), encoded)
      yield* driver.replace(table, encoded)
      yield* record(table, "update", [{ before, after: encoded }])
      return yield* codec.decode(encoded)
    }))

  const upsert = (table: Table.Any, row: Readonly<Record<string, unknown>>) =>
    atomically(Effect.gen(function*() {
      const codec = RowCodec.of(table)
      const scope = yield* TenantScope.of(table)
      const encoded = yield* codec.encode(row)
      yield* TenantScope.checkWrite(table, scope, encoded)
      const id = idOf(encoded)
      const before = yield* driver.get(table, id, { forUpdate: true })
      if (Option.isNone(before)) {
        yield* driver.insert(table, [encoded])
        yield* record(table, "insert", [{ before: null, after: encoded }])
      } else if (TenantScope.sees(scope, before.value)) {
        yield* driver.replace(table, encoded)
        yield* record(table, "update", [{ before: before.value, after: encoded }])
      } else {
        // Another tenant's row is never overwritten; the id is taken, as an insert would say.
        return yield* new DuplicateRow({ table: table.name, id })
      }
      return yield* codec.decode(encoded)
    }))

  const remove = (table: Table.Any, id: string) =>
    atomically(Effect.gen(function*() {
      const before = yield* existing(table, id)
      yield* driver.delete(table, id)
      yield* record(table, "delete", [{ before, after: null }])
    }))

  const purge = (table: Table.Any, ids: ReadonlyArray<string>) =>
    Effect.suspend(() =>
      !table.name.startsWith("_fw_")
        ? Effect.dieMessage(`purge is for the framework's own tables, not ${table.name}`)
        : ids.length === 0
        ? Effect.void
        : driver.deleteMany(table, ids)
    )

  type Options = {
    readonly where?: Readonly<Record<string, unknown>>
    readonly orderBy?: string
    readonly direction?: "asc" | "desc"
    readonly limit?: number
    readonly offset?: number
    readonly pageSize?: number
  }

  const whereOf = (table: Table.Any, options: Options | undefined) =>
    Effect.zipRight(
      noteRead(table.name),
      Effect.flatMap(TenantScope.of(table), (scope) => clausesOf(table, options?.where, scope))
    )

  const find = (table: Table.Any, options?: Options) =>
    Effect.gen(function*() {
      yield* noteRead(table.name)
      const query = yield* queryOf(table, options, yield* TenantScope.of(table))
      return yield* decodeAll(table, yield* driver.find(table, query))
    })

  const count = (table: Table.Any, options?: Options) =>
    Effect.flatMap(whereOf(table, options), (where) => driver.count(table, where))

  const walk = (table: Table.Any, options?: Options) => {
    const limit = Math.max(1, wholeNumber(options?.pageSize) ?? 1000)
    return Stream.unwrap(Effect.map(whereOf(table, options), (where) =>
      Stream.paginateChunkEffect(null as string | null, (after) =>
        Effect.flatMap(driver.page(table, { where, after, limit }), (rows) =>
          Effect.map(decodeAll(table, rows), (decoded) =>
            [
              Chunk.unsafeFromArray(decoded),
              rows.length < limit ? Option.none() : Option.some(idOf(rows[rows.length - 1]!))
            ] as const
          )))))
  }

  // The operations are implemented over `Table.Any` and unknown rows: the table schema validates
  // every row at run time, so the generic signatures of StoreShape are exactly the schema's types.
  return {
    dialect: driver.dialect,
    transaction,
    insert,
    insertMany: traced("insertMany", insertMany),
    update: traced("update", update),
    upsert: traced("upsert", upsert),
    delete: traced("delete", remove),
    purge: traced("purge", purge),
    get,
    find: traced("find", find),
    count: traced("count", count),
    walk
  } as unknown as StoreShape
}
