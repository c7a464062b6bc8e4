/**
 * The staged one-row insert: a one-row insert outside a transaction whose change must be staged
 * (stagers, fleet scope) committed in one step where the tier allows it, instead of the client's
 * transaction around the row and each stager's writes. Used by `StoreRuntime`'s `insert`.
 *
 * - SQLite (`Driver.transactNow`): BEGIN, the row, every stager's statements (`StageStatements`)
 *   and COMMIT in one synchronous fiber step.
 * - PostgreSQL (`Driver.insertFusedNow`): the row, every stager's part and the fleet outbox row as
 *   one autocommitted statement (`FusedStage`), one round trip; when a part is refused (a history
 *   version that clashed) nothing was written, and the insert runs again in a transaction.
 */
import type { Fiber } from "effect"
import { Effect, Either } from "effect"
import type { ChangeTapShape, PendingChange, Stager } from "../changes/ChangeTap.js"
import * as CommitWitness from "./CommitWitness.js"
import * as Driver from "./Driver.js"
import { CommitUnknown, DuplicateRow, StoreUnavailable } from "../Errors.js"
import type { RowInvalid, StoreError, UnknownField } from "../Errors.js"
import { noteReadIn } from "../changes/ReadTracking.js"
import * as FusedStage from "./FusedStage.js"
import * as RowCodec from "../schema/RowCodec.js"
import * as StageStatements from "./StageStatements.js"
import type { FindOptions } from "./StoreShape.js"
import type * as Table from "../schema/Table.js"
import * as TenantScope from "./TenantScope.js"

/** What the staged insert needs of the store it belongs to. */
export interface Deps {
  readonly driver: Driver.Driver
  readonly tap: ChangeTapShape
  /** A new row encoded, its `id` generated when absent. */
  readonly encodeNew: (table: Table.Any, row: Readonly<Record<string, unknown>>) => Either.Either<Driver.Encoded, RowInvalid>
  /** The change a one-row insert written by `fiber` makes. */
  readonly insertedChange: (fiber: Fiber.RuntimeFiber<unknown, unknown>, table: Table.Any, after: Driver.Encoded) => PendingChange
  /** Publishes committed changes. */
  readonly publish: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void>
  /** The driver query of `find`'s options, unscoped (stagers are system code). */
  readonly queryOf: (table: Table.Any, options: FindOptions<Table.Any>) => Either.Either<Driver.Query, UnknownField | RowInvalid>
  readonly decodeAll: (table: Table.Any, rows: ReadonlyArray<Driver.Encoded>) => Either.Either<Array<unknown>, RowInvalid>
}

/** The staged one-row insert of one store. */
export interface StagedInsert {
  /**
   * The insert of `row` by `fiber` (outside a transaction, no tracer installed) as one step, or
   * `undefined` when that cannot be: the caller then takes the client's transaction. `inTransaction`
   * is that insert, for a one-step write the server refused (nothing written).
   */
  readonly insertNow: (
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    table: Table.Any,
    row: Readonly<Record<string, unknown>>,
    inTransaction: () => Effect.Effect<unknown, StoreError>
  ) => Effect.Effect<unknown, StoreError> | undefined
}

const isCommitUnknown = (error: unknown): boolean => error instanceof CommitUnknown

/** The staged insert over `deps`. */
export const make = (deps: Deps): StagedInsert => {
  const { decodeAll, driver, encodeNew, insertedChange, publish, queryOf, tap } = deps
  const transactNow = driver.transactNow
  /**
   * The stagers' statements run synchronously in a `transactNow` body: as the store would run them
   * for a stager (system scope, no change events), reads noted as `fiber`'s.
   */
  const stagingNow = (fiber: Fiber.RuntimeFiber<unknown, unknown>, now: Driver.Now): StageStatements.Now => ({
    insert: (table, rows) => {
      for (const row of rows) {
        const encoded = encodeNew(table, row)
        if (Either.isLeft(encoded)) return encoded.left
        const failed = now.insert(table, encoded.right)
        if (failed !== undefined) return failed
      }
      return undefined
    },
    find: (table, options) => {
      noteReadIn(fiber, table.name)
      const query = queryOf(table, options)
      if (Either.isLeft(query)) return Either.left(query.left)
      const rows = now.find(table, query.right)
      return rows instanceof StoreUnavailable ? Either.left(rows) : decodeAll(table, rows)
    }
  })

  /** The new row encoded, within the writer's tenant and decodable: the stored form and the row the insert answers. */
  const checkedNew = (
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    table: Table.Any,
    row: Readonly<Record<string, unknown>>
  ): Either.Either<{ readonly after: Driver.Encoded; readonly decoded: unknown }, StoreError> => {
    const encoded = encodeNew(table, row)
    if (Either.isLeft(encoded)) return Either.left(encoded.left)
    const after = encoded.right
    const refused = TenantScope.violation(table, TenantScope.ofFiber(fiber, table), after)
    if (refused !== undefined) return Either.left(refused)
    return Either.map(RowCodec.of(table).decode(after), (decoded) => ({ after, decoded }))
  }

  /**
   * A one-row insert outside a transaction, with stagers, on a tier that runs a short transaction
   * synchronously (SQLite): the row, every stager's statements and COMMIT in this fiber step, then
   * publication — the client's transaction costs several times the insert. `undefined` when that
   * cannot be (a stager without `statements`, a tap that stages itself under fleet scope, the tier
   * not ready): the caller takes the client's transaction. Called with no tracer installed.
   */
  const insertStagedNow = (
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    table: Table.Any,
    row: Readonly<Record<string, unknown>>
  ): Effect.Effect<unknown, StoreError> | undefined => {
    if (transactNow === undefined || tap.scope !== "local") return undefined
    const plans: Array<NonNullable<Stager["statements"]>> = []
    for (const stager of tap.stagers()) {
      if (stager.statements === undefined) return undefined
      plans.push(stager.statements)
    }
    const checked = checkedNew(fiber, table, row)
    if (Either.isLeft(checked)) return Effect.fail(checked.left)
    const { after, decoded } = checked.right
    const changes = [insertedChange(fiber, table, after)]
    const outcome = transactNow(fiber, (now) => {
      const inserted = now.insert(table, after)
      if (inserted !== undefined) return Either.left(inserted)
      const staging = stagingNow(fiber, now)
      for (const plan of plans) {
        const staged = StageStatements.runNow(plan(changes), staging)
        if (Either.isLeft(staged)) return staged
      }
      return Either.right(undefined)
    })
    if (outcome === Driver.NotNow) return undefined
    if (Either.isLeft(outcome)) {
      if (!isCommitUnknown(outcome.left)) return Effect.fail(outcome.left)
      CommitWitness.markIn(fiber)
      return Effect.zipRight(tap.commitUnknown === undefined ? Effect.void : tap.commitUnknown(changes), Effect.fail(outcome.left))
    }
    CommitWitness.markIn(fiber)
    return Effect.as(publish(changes), decoded)
  }

  const insertFusedNow = driver.insertFusedNow
  /**
   * A one-row insert outside a transaction on PostgreSQL whose every stager (and the fleet tap)
   * gives its part for the change: one statement, then publication. `undefined` when that cannot
   * be. Awaited without interruption, as a one-row insert is: a committed row is announced.
   */
  const insertFused = (
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    table: Table.Any,
    row: Readonly<Record<string, unknown>>,
    inTransaction: () => Effect.Effect<unknown, StoreError>
  ): Effect.Effect<unknown, StoreError> | undefined => {
    if (insertFusedNow === undefined || (tap.scope !== "local" && tap.fuse === undefined)) return undefined
    const stagers = tap.stagers()
    for (const stager of stagers) if (stager.fuse === undefined) return undefined
    const checked = checkedNew(fiber, table, row)
    if (Either.isLeft(checked)) return Effect.fail(checked.left)
    const { after, decoded } = checked.right
    const change = insertedChange(fiber, table, after)
    const parts: Array<FusedStage.Part> = []
    for (const stager of stagers) {
      const part = stager.fuse!(change)
      if (part === undefined) return undefined
      if (part !== null) parts.push(part)
    }
    const changes = [change]
    if (tap.fuse !== undefined) parts.push(tap.fuse(changes))
    const outcome = insertFusedNow(table, after, parts, fiber)
    if (outcome === Driver.NotNow) return undefined
    return Effect.flatMap(outcome.effect, (written): Effect.Effect<unknown, StoreError> => {
      if (written === undefined) {
        CommitWitness.markIn(fiber)
        return Effect.as(publish(changes), decoded)
      }
      if (written === FusedStage.Refused) return inTransaction()
      if (written instanceof DuplicateRow) return Effect.fail(written)
      CommitWitness.markIn(fiber)
      return Effect.zipRight(tap.commitUnknown === undefined ? Effect.void : tap.commitUnknown(changes), Effect.fail(written))
    })
  }

  return {
    insertNow: (fiber, table, row, inTransaction) =>
      transactNow !== undefined ? insertStagedNow(fiber, table, row) : insertFused(fiber, table, row, inTransaction)
  }
}
