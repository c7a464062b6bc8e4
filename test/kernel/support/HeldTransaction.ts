/**
 * A transaction held open in another fiber: it inserts a row, then waits until released and
 * rolls back. For tests of what other fibers see and do while it is open.
 */
import { Deferred, Effect, Fiber } from "effect"
import type { StoreShape } from "../../../src/kernel/store/Store.js"
import type * as Table from "../../../src/kernel/schema/Table.js"

/** The failure that rolls the held transaction back. */
export class Abort {
  readonly _tag = "Abort"
}

/**
 * Opens the transaction, inserting `row` into `table`, and returns once the row is written:
 * `release` lets it roll back, `rolledBack` awaits that (true once it failed with `Abort`).
 */
export const hold = <T extends Table.Any>(store: StoreShape, table: T, row: Table.Insert<T>) =>
  Effect.gen(function*() {
    const opened = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const writer = yield* store.transaction(Effect.gen(function*() {
      yield* store.insert(table, row)
      yield* Deferred.succeed(opened, undefined)
      yield* Deferred.await(release)
      return yield* Effect.fail(new Abort())
    })).pipe(Effect.either, Effect.fork)
    yield* Deferred.await(opened)
    return {
      release: Deferred.succeed(release, undefined),
      rolledBack: Effect.map(Fiber.join(writer), (outcome) => outcome._tag === "Left" && outcome.left instanceof Abort)
    }
  })
