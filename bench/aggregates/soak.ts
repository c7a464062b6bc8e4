/**
 * The full-size randomized check of incremental aggregates: 10,000 steps (inserts, updates with
 * group moves, deletes) per tier, every op with and without groupBy, each step compared with a full
 * recomputation. `FW_SOAK_STEPS` and `FW_SOAK_TIERS` (comma list) shrink it.
 */
import { Context, Effect } from "effect"
import { Store } from "../../src/kernel/store/Store.js"
import { check, incrementalAggregates, random, step } from "../../test/aggregates/randomized.js"
import type { OrderRow } from "../../test/aggregates/randomized.js"
import { appTables } from "../../test/aggregates/tables.js"
import { base, client, scheduler } from "./stack.js"
import type { Tier } from "./stack.js"

const steps = Number(process.env.FW_SOAK_STEPS ?? 10_000)
const tiers = (process.env.FW_SOAK_TIERS ?? "memory,sqlite,pg").split(",") as ReadonlyArray<Tier>

const soak = (tier: Tier) =>
  Effect.scoped(Effect.gen(function*() {
    const ctx = yield* base(yield* client(tier), appTables)
    const store = Context.get(ctx, Store)
    const aggregates = incrementalAggregates()
    const s = yield* scheduler(tier, ctx, aggregates, appTables)
    yield* s.booted
    const next = random(2026)
    const mirror = new Map<string, OrderRow>()
    const counter = { n: 0 }
    const start = performance.now()
    for (let i = 0; i < steps; i++) {
      yield* step(store, mirror, next, counter)
      yield* check(s, aggregates, mirror.values(), `step ${i}`)
    }
    console.log(`${tier}: ${steps} steps × ${aggregates.length} aggregates exact after every step (${((performance.now() - start) / 1000).toFixed(1)} s, ${mirror.size} rows at the end)`)
  }))

export const run = async () => {
  for (const tier of tiers) await Effect.runPromise(soak(tier))
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
