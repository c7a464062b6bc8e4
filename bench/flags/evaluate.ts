/**
 * `isFlagEnabled` evaluations per second inside a running fiber (the way a handler calls it),
 * against `unleash-client` and `@openfeature/flagd-core` evaluating the equivalent flag in the same
 * run. One boolean flag, three targeting rules (ORed), a 30 % rollout, 10,000 distinct subjects
 * (workload of notes/flags-aggregates-standing.md appendix A, with rules every engine expresses
 * alike: an id list, one metadata equality, two ANDed metadata equalities).
 *
 * `FLAGS_BENCH_ITER` sets evaluations per round (default 1,000,000); 5 alternating rounds, medians.
 * `FLAGS_BENCH_ONLY` keeps only the engines whose name contains it (to profile one engine).
 */
import { Effect } from "effect"
import { createRequire } from "node:module"
import * as FlagRegistry from "../../src/flags/FlagRegistry.js"
import { isFlagEnabled } from "../../src/flags/index.js"
import * as Subject from "../../src/kernel/Subject.js"
import { perSecond, table } from "../support.js"

const require = createRequire(import.meta.url)
const FLAG = "new-checkout"
const ITER = Number(process.env.FLAGS_BENCH_ITER ?? 1_000_000)
const ROUNDS = Number(process.env.FLAGS_BENCH_ROUNDS ?? 5)

let seed = 42
const rnd = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}
const pick = <A>(all: ReadonlyArray<A>) => all[Math.floor(rnd() * all.length)]!
const EXPLICIT = Array.from({ length: 20 }, (_, i) => `user-${i * 97}`)
const users = Array.from({ length: 10_000 }, (_, i) => ({
  id: `user-${i}`,
  internal: rnd() < 0.1,
  plan: pick(["free", "pro", "team", "enterprise"]),
  country: pick(["US", "DE", "FR", "GB", "NL", "JP", "BR", "IN"])
}))
const N = users.length

interface Round {
  readonly opsPerSec: number
  /** CPU time per evaluation: on a loaded shared machine the wall clock also counts waits for a core. */
  readonly cpuNs: number
  readonly on: number
}
type Engine = { readonly name: string; readonly setup: () => Promise<(iterations: number) => Round> }

/** Runs `loop` once, on the wall clock and in CPU time. */
const timed = (iterations: number, loop: (iterations: number) => number): Round => {
  const t0 = performance.now()
  const cpu0 = process.cpuUsage()
  const on = loop(iterations)
  const cpu = process.cpuUsage(cpu0)
  return { opsPerSec: iterations / ((performance.now() - t0) / 1000), cpuNs: (cpu.user + cpu.system) * 1000 / iterations, on }
}

/**
 * `yield*` (how a handler calls it) or, with `asEffect`, run as an effect by `Effect.flatMap`
 * (a commit step and the flatMap's own), which handlers written with `pipe` pay.
 */
const fwEngine = (name: string, store: "memory" | "sql", asEffect = false): Engine => ({
  name,
  setup: async () => {
    const registry = FlagRegistry.make({
      store,
      flags: {
        [FLAG]: {
          rollout: 30,
          targeting: [
            { subjectIds: EXPLICIT },
            { metadata: { internal: true } },
            { metadata: { plan: "enterprise", country: "DE" } }
          ]
        }
      }
    })
    const subjects = users.map((u) =>
      ({ subject: Subject.make({ type: "user", id: u.id, tenantId: "t1", metadata: { internal: u.internal, plan: u.plan, country: u.country } }) })
    )
    const loop = (iterations: number) =>
      Effect.gen(function*() {
        let on = 0
        if (asEffect) {
          for (let i = 0; i < iterations; i++) if (yield* Effect.flatMap(isFlagEnabled(subjects[i % N]!, FLAG), Effect.succeed)) on++
        } else {
          for (let i = 0; i < iterations; i++) if (yield* isFlagEnabled(subjects[i % N]!, FLAG)) on++
        }
        return on
      }).pipe(Effect.provideService(FlagRegistry.FlagRegistry, registry))
    Effect.runSync(loop(200_000))
    return (iterations) => timed(iterations, (n) => Effect.runSync(loop(n)))
  }
})

/** The evaluator without Effect: what a fiber step costs on top of it. */
const plain: Engine = {
  name: "fw registry.evaluateSync (no fiber step)",
  setup: async () => {
    const registry = FlagRegistry.make({
      flags: {
        [FLAG]: {
          rollout: 30,
          targeting: [{ subjectIds: EXPLICIT }, { metadata: { internal: true } }, { metadata: { plan: "enterprise", country: "DE" } }]
        }
      }
    })
    const subjects = users.map((u) =>
      Subject.make({ type: "user", id: u.id, tenantId: "t1", metadata: { internal: u.internal, plan: u.plan, country: u.country } })
    )
    const loop = (iterations: number) => {
      let on = 0
      for (let i = 0; i < iterations; i++) if (registry.evaluateSync(FLAG, subjects[i % N]!, 0)) on++
      return on
    }
    loop(200_000)
    return (iterations) => timed(iterations, loop)
  }
}

const unleash: Engine = {
  name: "unleash-client 6.12.1 isEnabled",
  setup: async () => {
    const { InMemStorageProvider, Unleash } = require("unleash-client")
    const strategy = (constraints: ReadonlyArray<unknown>) => ({
      name: "flexibleRollout",
      parameters: { rollout: "30", stickiness: "userId", groupId: FLAG },
      constraints
    })
    const feature = {
      name: FLAG,
      enabled: true,
      type: "release",
      project: "default",
      stale: false,
      impressionData: false,
      strategies: [
        strategy([{ contextName: "userId", operator: "IN", values: EXPLICIT }]),
        strategy([{ contextName: "internal", operator: "IN", values: ["true"] }]),
        strategy([
          { contextName: "plan", operator: "IN", values: ["enterprise"] },
          { contextName: "country", operator: "IN", values: ["DE"] }
        ])
      ]
    }
    const client = new Unleash({
      appName: "fw-bench",
      url: "http://127.0.0.1:9/api/",
      refreshInterval: 0,
      disableMetrics: true,
      bootstrap: { data: [feature] },
      storageProvider: new InMemStorageProvider(),
      skipInstanceCountWarning: true
    })
    client.on("error", () => undefined)
    client.on("warn", () => undefined)
    await new Promise((resolve) => {
      client.once("ready", resolve)
      setTimeout(resolve, 3000)
    })
    const contexts = users.map((u) => ({ userId: u.id, properties: { internal: String(u.internal), plan: u.plan, country: u.country } }))
    const loop = (iterations: number) => {
      let on = 0
      for (let i = 0; i < iterations; i++) if (client.isEnabled(FLAG, contexts[i % N])) on++
      return on
    }
    loop(200_000)
    process.on("exit", () => client.destroy())
    return (iterations) => timed(iterations, loop)
  }
}

const flagd: Engine = {
  name: "@openfeature/flagd-core 4.0.1",
  setup: async () => {
    const { FlagdCore } = require("@openfeature/flagd-core")
    const config = {
      flags: {
        [FLAG]: {
          state: "ENABLED",
          defaultVariant: "off",
          variants: { on: true, off: false },
          targeting: {
            if: [
              {
                or: [
                  { in: [{ var: "targetingKey" }, EXPLICIT] },
                  { "==": [{ var: "internal" }, true] },
                  { and: [{ "==": [{ var: "plan" }, "enterprise"] }, { "==": [{ var: "country" }, "DE"] }] }
                ]
              },
              { fractional: [["on", 30], ["off", 70]] },
              "off"
            ]
          }
        }
      }
    }
    const core = new FlagdCore()
    core.setConfigurations(JSON.stringify(config))
    const logger = { debug() {}, info() {}, warn() {}, error() {} }
    const contexts = users.map((u) => ({ targetingKey: u.id, internal: u.internal, plan: u.plan, country: u.country }))
    const loop = (iterations: number) => {
      let on = 0
      for (let i = 0; i < iterations; i++) if (core.resolveBooleanEvaluation(FLAG, false, contexts[i % N], logger).value) on++
      return on
    }
    loop(200_000)
    return (iterations) => timed(iterations, loop)
  }
}

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

export const run = async () => {
  const all = [
    fwEngine("fw isFlagEnabled (memory registry)", "memory"),
    fwEngine("fw isFlagEnabled (usage tracked)", "sql"),
    fwEngine("fw isFlagEnabled run by Effect.flatMap", "memory", true),
    plain,
    unleash,
    flagd
  ]
  // `FLAGS_BENCH_ONLY=fw` keeps the engines whose name contains it (for a profile of one engine).
  const only = process.env.FLAGS_BENCH_ONLY
  const engines = only === undefined ? all : all.filter((engine) => engine.name.includes(only))
  const runners = []
  for (const engine of engines) runners.push(await engine.setup())
  const rates: Array<Array<number>> = engines.map(() => [])
  const cpus: Array<Array<number>> = engines.map(() => [])
  const onShare: Array<number> = engines.map(() => 0)
  for (let round = 0; round < ROUNDS; round++) {
    runners.forEach((runner, i) => {
      const { cpuNs, on, opsPerSec } = runner(ITER)
      rates[i]!.push(opsPerSec)
      cpus[i]!.push(cpuNs)
      onShare[i] = on / ITER
    })
  }
  const medians = rates.map(median)
  const cpuMedians = cpus.map(median)
  const fw = medians[0]!
  const fwCpu = cpuMedians[0]!
  table(`flag evaluations per second (3 rules, 30 % rollout, 10,000 subjects; ${ITER.toLocaleString("en-US")} per round, medians of ${ROUNDS} alternating rounds)`, engines.map((engine, i) => ({
    engine: engine.name,
    "evals/s": perSecond(medians[i]!),
    "ns/eval": Math.round(1e9 / medians[i]!),
    "on share": onShare[i]!.toFixed(4),
    "fw (memory) ÷ this": Number((fw / medians[i]!).toFixed(2)),
    "CPU ns/eval": Math.round(cpuMedians[i]!),
    "fw ÷ this (CPU)": Number((cpuMedians[i]! / fwCpu).toFixed(2))
  })))
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await run()
  process.exit(0)
}
