/**
 * Issue 38 item 7: an incremental aggregate never answers from a state that is not built. A read
 * right after the first boot (rows already in the source) waits for the initial build and gets
 * the rows a full recomputation gives, `maxAgeMs` included; a build that cannot finish within the
 * read's `buildWaitMs` fails `AggregateNotReady`. `nextRefreshAt` is set as soon as the boot
 * returns, and stays set through a manual refresh.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Effect, Exit, Fiber, Option, Queue, Schema, Scope, TestClock } from "effect"
import type * as Aggregate from "../../src/aggregates/Aggregate.js"
import { defineAggregate } from "../../src/aggregates/index.js"
import { Store } from "../../src/kernel/store/Store.js"
import { check, incrementalAggregates, writer } from "./randomized.js"
import { base, scheduler, tiers } from "./support.js"

const Out = Schema.Struct({ g: Schema.String, h: Schema.Boolean, value: Schema.NullOr(Schema.Number) })

/** Sum of x by (g, h) and a count of every row, shaped as in `randomized` so `check` can recompute them. */
const two = (options: Pick<Aggregate.Options<typeof Out.Type, typeof Out.Encoded>, "bootRefresh" | "refresh"> = {}) =>
  incrementalAggregates().filter((a) => a.name === "sum_grouped" || a.name === "count_all").map((a) =>
    defineAggregate({
      name: a.name,
      output: Out,
      incremental: { source: "orders", op: a.incremental!.op, ...(a.incremental!.column === undefined ? {} : { column: a.incremental!.column }), groupBy: a.incremental!.groupBy, toRow: a.incremental!.toRow },
      ...options
    })
  )

/** Rows already in the source when the aggregates first boot. */
const seeded = (tier: (typeof tiers)[number]) =>
  Effect.gen(function*() {
    const ctx = yield* base(tier)
    const orders = writer(Context.get(ctx, Store), 3)
    for (let i = 0; i < 40; i++) yield* orders.step
    return { ctx, orders }
  })

/**
 * Waits until a fiber sleeps on the TestClock until `at` (a read's wait has started; an odd `at`,
 * as the stack has timers of its own), or `unless` has ended: no timing involved, each check lets
 * the event loop turn once (PostgreSQL answers arrive meanwhile).
 */
const untilSleeping = (at: number, unless: Fiber.Fiber<unknown, unknown>) =>
  Effect.gen(function*() {
    while (!Chunk.some(yield* TestClock.sleeps(), (due) => due === at) && Option.isNone(yield* Fiber.poll(unless))) {
      yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
  })

for (const tier of tiers) {
  describe(`incremental aggregate before its first build: ${tier.name}`, () => {
    it.scoped("a read right after the first boot answers the rows already in the source (an ungrouped one its one row), maxAgeMs included", () =>
      Effect.gen(function*() {
        const { ctx, orders } = yield* seeded(tier)
        const aggregates = incrementalAggregates()
        const s = yield* scheduler(tier.name, ctx, aggregates)
        // No `booted`: the read itself must not answer before the build.
        yield* check(s, aggregates, orders.mirror.values(), "the first boot")
        const counted = yield* s.read("count_all", { maxAgeMs: 1_000 })
        assert.deepStrictEqual(counted, [{ g: "", h: false, value: orders.mirror.size }])
        assert.strictEqual((yield* s.meta("count_all")).rowCount, 1)
      }))

    if (tier.name !== "sqlite") {
      // A build held back deterministically: memory, by a store transaction holding the writer;
      // PostgreSQL, by a transaction holding a lock on the source that the rebuild's lock waits
      // for. (SQLite has one connection: anything holding it holds the boot itself.)
      it.scoped("a read waits for a held build; with buildWaitMs it fails AggregateNotReady when the build does not finish in time, and a later read gets the rows", () =>
        Effect.gen(function*() {
          const { ctx, orders } = yield* seeded(tier)
          const store = Context.get(ctx, Store)
          const aggregates = two()
          if (tier.name === "pg") {
            // The triggers exist first, so the boot below runs no DDL (which would wait for the hold too).
            const first = yield* Scope.make()
            yield* Effect.flatMap(scheduler(tier.name, ctx, aggregates, first), (s) => s.booted)
            yield* Scope.close(first, Exit.void)
          }
          const held = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const hold: Effect.Effect<void, unknown> = tier.name === "memory"
            ? store.transaction(Effect.zipRight(Deferred.succeed(held, undefined), Deferred.await(release)))
            : Effect.flatMap(SqlClient.SqlClient, (sql) =>
              sql.withTransaction(Effect.gen(function*() {
                yield* sql`LOCK TABLE orders IN ROW EXCLUSIVE MODE`
                yield* Deferred.succeed(held, undefined)
                yield* Deferred.await(release)
              }))).pipe(Effect.provide(ctx))
          const holder = yield* Effect.fork(hold)
          yield* Deferred.await(held)
          // PostgreSQL: an async boot forgets the state, so this boot builds it again (as a first boot does).
          const s = yield* scheduler(tier.name, ctx, tier.name === "pg" ? two({ bootRefresh: "async" }) : aggregates)

          const late = yield* Effect.fork(Effect.either(s.read("sum_grouped", { buildWaitMs: 12_345 })))
          yield* untilSleeping(12_345, late)
          yield* TestClock.adjust(12_345)
          const failed = yield* Fiber.join(late)
          assert.isTrue(failed._tag === "Left" && failed.left._tag === "AggregateNotReady", JSON.stringify(failed))
          if (failed._tag === "Left") assert.include(failed.left.message, `aggregate "sum_grouped" is not built yet`)

          const waiting = yield* Effect.fork(s.read("count_all"))
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(holder)
          assert.deepStrictEqual(yield* Fiber.join(waiting), [{ g: "", h: false, value: orders.mirror.size }])
          yield* check(s, aggregates, orders.mirror.values(), "the held build")
        }))
    }

    it.scoped("nextRefreshAt is set when the boot returns and through a manual refresh", () =>
      Effect.gen(function*() {
        const { ctx } = yield* seeded(tier)
        const Row = Schema.Struct({ k: Schema.String, total: Schema.Number })
        const hourly = defineAggregate({ name: "hourly", refresh: "1h", output: Row, build: () => [{ k: "a", total: 1 }], bootRefresh: "sync" })
        const s = yield* scheduler(tier.name, ctx, [hourly, ...two({ refresh: "1d" })])
        assert.strictEqual((yield* s.meta("hourly")).nextRefreshAt?.getTime(), 3_600_000)
        assert.strictEqual((yield* s.meta("sum_grouped")).nextRefreshAt?.getTime(), 86_400_000)
        assert.strictEqual(yield* s.refresh("hourly"), "refreshed")
        assert.strictEqual((yield* s.meta("hourly")).nextRefreshAt?.getTime(), 3_600_000)
        yield* s.booted
        assert.strictEqual(yield* s.refresh("sum_grouped"), "refreshed")
        assert.strictEqual((yield* s.meta("sum_grouped")).nextRefreshAt?.getTime(), 86_400_000)
        const outcomes = yield* s.outcomes
        yield* TestClock.adjust(3_600_000)
        yield* Queue.take(outcomes).pipe(Effect.repeat({ until: (o) => o.name === "hourly" }))
        assert.strictEqual((yield* s.meta("hourly")).nextRefreshAt?.getTime(), 7_200_000)
      }))
  })
}
