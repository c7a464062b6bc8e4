/**
 * A stager's work (see `ChangeTap.Stager`) written as plain store statements — finds and inserts —
 * yielded by a generator, so the store can run it either way:
 *
 * - `run`: through the Store's effects, inside the writing transaction (every tier);
 * - `runNow`: synchronously, against statements that answer at once. A tier that can run a short
 *   transaction within one fiber step (SQLite: `Driver.transactNow`) then commits a one-row write
 *   and its stagers' statements in that step, without the client's transaction around them.
 *
 * The stager's own code between statements (bookkeeping, the next statement's choice) runs the same
 * in both; a failing statement ends the plan with its typed error.
 *
 * ```ts
 * const statements = (changes) => function*() {
 *   const newest = yield* StageStatements.find(History, { where: { rowId }, orderBy: "version", direction: "desc", limit: 1 })
 *   yield* StageStatements.insert(History, [{ rowId, version: (newest[0]?.version ?? 0) + 1 }])
 * }()
 * ```
 */
import { Effect, Either } from "effect"
import type { StoreError } from "../Errors.js"
import type { FindOptions, StoreShape } from "./StoreShape.js"
import type * as Table from "../schema/Table.js"

/** One statement of a plan. */
export type Statement =
  | { readonly _tag: "Find"; readonly table: Table.Any; readonly options: FindOptions<Table.Any> }
  | { readonly _tag: "Insert"; readonly table: Table.Any; readonly rows: ReadonlyArray<Readonly<Record<string, unknown>>> }

/** A stager's work: statements yielded in order, each resumed with its result. */
export type Plan<A> = Generator<Statement, A, unknown>

/** Rows of `table` matching `options`, as `Store.find` returns them (system scope: every tenant). */
export function* find<T extends Table.Any>(
  table: T,
  options: FindOptions<T>
): Generator<Statement, ReadonlyArray<Table.Row<T>>, unknown> {
  return (yield { _tag: "Find", table, options: options as FindOptions<Table.Any> }) as ReadonlyArray<Table.Row<T>>
}

/** Inserts `rows` into `table`, as `Store.insertMany` does (an absent `id` is generated). */
export function* insert<T extends Table.Any>(
  table: T,
  rows: ReadonlyArray<Table.Insert<T>>
): Generator<Statement, void, unknown> {
  if (rows.length === 0) return
  yield { _tag: "Insert", table, rows: rows as ReadonlyArray<Readonly<Record<string, unknown>>> }
}

/** Runs the plan `make` builds through `store`, statement after statement. */
export const run = <A>(store: StoreShape, make: () => Plan<A>): Effect.Effect<A, StoreError> =>
  Effect.suspend(() => {
    const plan = make()
    const step = (input: unknown): Effect.Effect<A, StoreError> => {
      const next = plan.next(input)
      if (next.done === true) return Effect.succeed(next.value)
      const statement = next.value
      return Effect.flatMap(
        statement._tag === "Find"
          ? store.find(statement.table, statement.options)
          : statement.rows.length === 1
          // One row as `insert` does it: no savepoint around it inside the writing transaction.
          ? store.insert(statement.table, statement.rows[0] as Table.Insert<Table.Any>)
          : store.insertMany(statement.table, statement.rows as ReadonlyArray<Table.Insert<Table.Any>>),
        step
      )
    }
    return step(undefined)
  })

/** Statements answered synchronously, as the store would answer them (rows decoded, `id`s generated). */
export interface Now {
  readonly find: (table: Table.Any, options: FindOptions<Table.Any>) => Either.Either<ReadonlyArray<unknown>, StoreError>
  readonly insert: (table: Table.Any, rows: ReadonlyArray<Readonly<Record<string, unknown>>>) => StoreError | undefined
}

/** Runs `plan` synchronously against `now`; the first failing statement ends it. */
export const runNow = <A>(plan: Plan<A>, now: Now): Either.Either<A, StoreError> => {
  let input: unknown = undefined
  while (true) {
    const next = plan.next(input)
    if (next.done === true) return Either.right(next.value)
    const statement = next.value
    if (statement._tag === "Find") {
      const rows = now.find(statement.table, statement.options)
      if (Either.isLeft(rows)) return Either.left(rows.left)
      input = rows.right
    } else {
      const failed = now.insert(statement.table, statement.rows)
      if (failed !== undefined) return Either.left(failed)
      input = undefined
    }
  }
}
