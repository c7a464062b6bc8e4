/**
 * Fleet-wide leases (`_fw_search_lease`): maintenance that one replica at a time runs — the repair
 * sweep (the ledger is shared; a sweep on every replica would repeat every repair) and a reindex.
 */
import { Clock, Duration, Effect, Fiber, Option, Schedule } from "effect"
import type { StoreShape } from "../kernel/store/Store.js"
import { SearchLease } from "./tables.js"

/** How long a lease outlives a stalled holder at most (it is renewed while the holder works). */
export const leaseMs = 60_000

/** Leases held as `replica`. */
export const make = (store: StoreShape, replica: string) => {
  /**
   * Takes the lease `name` for `leaseMs` (free, lapsed, or already this replica's). The read locks
   * the row (PostgreSQL `FOR UPDATE`), and a concurrent first claim fails `DuplicateRow`, so two
   * replicas never both hold it.
   */
  const claim = (name: string) =>
    store.transaction(Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const current = yield* store.get(SearchLease, name, { forUpdate: true })
      const lease = { id: name, holder: replica, expiresAt: now + leaseMs }
      if (Option.isNone(current)) {
        yield* store.insert(SearchLease, lease)
        return true
      }
      if (current.value.holder !== replica && current.value.expiresAt > now) return false
      yield* store.upsert(SearchLease, lease)
      return true
    })).pipe(Effect.catchTag("DuplicateRow", () => Effect.succeed(false)))

  const release = (name: string) =>
    store.transaction(Effect.gen(function*() {
      const current = yield* store.get(SearchLease, name, { forUpdate: true })
      if (Option.isSome(current) && current.value.holder === replica) yield* store.delete(SearchLease, name)
    })).pipe(Effect.catchAll((e) => Effect.logWarning(`search: could not release the lease ${name}`, e)))

  /**
   * Runs `work` under the lease `name`, renewed every third of `leaseMs` while it runs; `None`
   * when another replica holds it.
   */
  const withLease = <A, E, R>(name: string, work: Effect.Effect<A, E, R>) =>
    Effect.flatMap(claim(name), (held) =>
      !held ? Effect.succeed(Option.none<A>()) : Effect.gen(function*() {
        const renew = yield* claim(name).pipe(
          Effect.catchAll(() => Effect.succeed(false)),
          Effect.repeat(Schedule.spaced(Duration.millis(leaseMs / 3))),
          Effect.delay(Duration.millis(leaseMs / 3)),
          Effect.fork
        )
        return yield* work.pipe(
          Effect.map(Option.some),
          Effect.ensuring(Effect.zipRight(Fiber.interrupt(renew), release(name)))
        )
      }))

  return { withLease }
}
