/**
 * Memory tier point reads inside one Effect: a million `Store.get`s of random ids (over 10,000
 * rows) run by one `Effect.forEach` with `discard`, and by one `Effect.gen` loop, against raw
 * `Map.get` over the same ids on a Map of the same rows, in the same run. Per-read figures through
 * `runPromise` (bench/store/single.ts) are dominated by starting a fiber per batch; here the
 * reads run in one fiber, so the figure is the store's own per-read cost.
 *
 * Rounds alternate (A, B, C, A, B, C …, after one warm-up round each) so the shared machine's noise
 * hits every peer; reads/s is wall time, reads per CPU second and CPU µs/read are this process's CPU
 * time (user + system), the steadier measure on a loaded machine.
 * `BENCH_READS` sets the reads per round (default 1,000,000), `BENCH_READ_ROUNDS` the rounds (default 5).
 *
 * `npx tsx bench/store/memoryReads.ts`
 */
import { Effect, ManagedRuntime, Option } from "effect"
import * as Store from "../../src/kernel/store/Store.js"
import { itemsTable, memoryTier } from "./shared.js"

const Items = itemsTable("bench_memory_read_items")
const rows = 10_000
const reads = Number(process.env.BENCH_READS ?? 1_000_000)
const rounds = Number(process.env.BENCH_READ_ROUNDS ?? 5)
const idOf = (i: number) => `item-${String(i).padStart(6, "0")}`
const seed = Array.from({ length: rows }, (_, i) => ({ id: idOf(i), tenantId: "t", name: `n${i}`, price: i }))

/** The ids read, in a random order (a fixed-seed LCG: every run reads the same sequence). */
const ids = (() => {
  let state = 12_345
  const out = new Array<string>(reads)
  for (let i = 0; i < reads; i++) {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648
    out[i] = idOf(state % rows)
  }
  return out
})()

interface Totals {
  wallMs: number
  cpuMs: number
}

export const run = async () => {
  const runtime = ManagedRuntime.make(memoryTier)
  const store = await runtime.runPromise(Store.Store)
  await runtime.runPromise(store.insertMany(Items, seed))
  const map = new Map(seed.map((row) => [row.id, row] as const))
  // Each peer touches what it read, so no read can be optimised away.
  let found = 0
  const peers: Record<string, () => Promise<void>> = {
    "Store.get, one Effect.forEach": () =>
      runtime.runPromise(Effect.forEach(ids, (id) => Effect.map(store.get(Items, id), (row) => {
        if (Option.isSome(row)) found++
      }), { discard: true })),
    "Store.get, one Effect.gen loop": () =>
      runtime.runPromise(Effect.gen(function*() {
        for (let i = 0; i < ids.length; i++) if (Option.isSome(yield* store.get(Items, ids[i]!))) found++
      })),
    "raw Map.get": async () => {
      for (let i = 0; i < ids.length; i++) if (map.get(ids[i]!) !== undefined) found++
    }
  }
  const totals: Record<string, Totals> = {}
  for (const [name, peer] of Object.entries(peers)) {
    await peer()
    totals[name] = { wallMs: 0, cpuMs: 0 }
  }
  for (let round = 0; round < rounds; round++) {
    for (const [name, peer] of Object.entries(peers)) {
      const cpu = process.cpuUsage()
      const start = performance.now()
      await peer()
      const wall = performance.now() - start
      const used = process.cpuUsage(cpu)
      totals[name]!.wallMs += wall
      totals[name]!.cpuMs += (used.user + used.system) / 1000
    }
  }
  await runtime.dispose()
  if (found !== (rounds + 1) * Object.keys(peers).length * reads) throw new Error(`found ${found} rows: some reads missed`)
  const n = rounds * reads
  const raw = totals["raw Map.get"]!
  console.log(`\nmemory tier point reads in one Effect: ${reads.toLocaleString("en-US")} random ids over ${rows.toLocaleString("en-US")} rows, ${rounds} alternating rounds`)
  console.table(Object.entries(totals).map(([name, t]) => ({
    read: name,
    "reads/s": Math.round(n / (t.wallMs / 1000)).toLocaleString("en-US"),
    // What one core does when the machine is shared: wall time then counts other processes' turns.
    "reads per CPU second": Math.round(n / (t.cpuMs / 1000)).toLocaleString("en-US"),
    "CPU µs/read": Number((t.cpuMs * 1000 / n).toFixed(3)),
    "vs Map.get (CPU)": Number((raw.cpuMs / t.cpuMs).toFixed(3))
  })))
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
