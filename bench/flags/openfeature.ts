/**
 * Flag evaluations per second through `@openfeature/server-sdk` with fw's provider, against the
 * same SDK with a trivial provider (a constant answer: the SDK's own floor) and with
 * `@openfeature/flagd-core`'s evaluator as its provider, plus fw's direct `isFlagEnabled` and
 * flagd-core called directly, in one run. The workload of `evaluate.ts`: one boolean flag, three
 * targeting rules (ORed), a 30 % rollout, 10,000 distinct contexts built once.
 *
 * The aim: fw's provider adds at most 10 % to the SDK's floor and is ahead of flagd's through the
 * same SDK. `OF_BENCH_ITER` sets SDK evaluations per round (default 100,000; the direct engines run
 * ten times as many); 5 alternating rounds, medians. `OF_BENCH_ONLY` keeps only the engines whose
 * name contains it (to profile one: `node --cpu-prof --import tsx bench/flags/openfeature.ts`).
 *
 * Figures (2 shared cores at load average 15–20, so wall times are mostly waits for a core; CPU
 * time per evaluation is the steadier measure): CPU per SDK call 27 µs with the trivial provider,
 * +4.5 % with fw's provider (+5.6 % with usage tracked), +11.2 % with flagd-core's; direct
 * `isFlagEnabled` 0.16 µs, direct flagd-core 0.42 µs. The CPU profile of the fw-provider engine
 * (`bench/profileSummary.ts`, start-up left out): fw's provider and evaluation 4.7 % of the busy
 * time; the SDK the rest — garbage collection 46 % (the spreads, frozen hook contexts and promises
 * of every call), its down-levelled async generator stepping 18 %, `evaluate` 6 %, object spreads
 * 6 %, and the before/after/finally hook phases it awaits even with no hook registered 11 %.
 */
import { OpenFeature } from "@openfeature/server-sdk"
import type { Client, JsonValue, Provider, ResolutionDetails } from "@openfeature/server-sdk"
import { Effect } from "effect"
import { createRequire } from "node:module"
import * as FlagRegistry from "../../src/flags/FlagRegistry.js"
import { isFlagEnabled } from "../../src/flags/index.js"
import * as Subject from "../../src/kernel/Subject.js"
import { FwServerProvider } from "../../src/openfeature/index.js"
import { perSecond, table } from "../support.js"

const require = createRequire(import.meta.url)
const FLAG = "new-checkout"
const ITER = Number(process.env.OF_BENCH_ITER ?? 100_000)
const ROUNDS = Number(process.env.OF_BENCH_ROUNDS ?? 5)

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
/** The evaluation contexts every SDK engine reads (fw maps the attributes to Subject metadata). */
const contexts = users.map((u) => ({ targetingKey: u.id, internal: u.internal, plan: u.plan, country: u.country }))

const fwFlags = {
  [FLAG]: {
    rollout: 30,
    targeting: [{ subjectIds: EXPLICIT }, { metadata: { internal: true } }, { metadata: { plan: "enterprise", country: "DE" } }]
  }
}

interface Round {
  readonly opsPerSec: number
  /** CPU time per evaluation: on a loaded shared machine the wall clock also counts waits for a core. */
  readonly cpuNs: number
  readonly on: number
}
interface Engine {
  readonly name: string
  /** Evaluations per round, as a multiple of `ITER`. */
  readonly scale: number
  readonly setup: () => Promise<(iterations: number) => Promise<Round>>
}

const timed = async (iterations: number, loop: (iterations: number) => Promise<number> | number): Promise<Round> => {
  const t0 = performance.now()
  const cpu0 = process.cpuUsage()
  const on = await loop(iterations)
  const cpu = process.cpuUsage(cpu0)
  return { opsPerSec: iterations / ((performance.now() - t0) / 1000), cpuNs: (cpu.user + cpu.system) * 1000 / iterations, on }
}

let domains = 0
/** An SDK client of its own domain bound to `provider`, measured by awaiting each `getBooleanValue`. */
const throughSdk = (name: string, provider: () => Provider): Engine => ({
  name,
  scale: 1,
  setup: async () => {
    const domain = `bench-${++domains}`
    await OpenFeature.setProviderAndWait(domain, provider())
    const client: Client = OpenFeature.getClient(domain)
    const loop = async (iterations: number) => {
      let on = 0
      for (let i = 0; i < iterations; i++) if (await client.getBooleanValue(FLAG, false, contexts[i % N]!)) on++
      return on
    }
    await loop(20_000)
    return (iterations) => timed(iterations, loop)
  }
})

/** The SDK's floor: a provider answering a constant, as cheaply as a provider can. */
const trivial = (): Provider => {
  const answer = { value: true, reason: "STATIC" }
  return {
    metadata: { name: "trivial" },
    runsOn: "server",
    resolveBooleanEvaluation: () => Promise.resolve(answer),
    resolveStringEvaluation: () => Promise.resolve({ value: "" }),
    resolveNumberEvaluation: () => Promise.resolve({ value: 0 }),
    resolveObjectEvaluation: <T extends JsonValue>(_key: string, value: T) => Promise.resolve({ value })
  }
}

interface FlagdCoreLike {
  setConfigurations(config: string): void
  resolveBooleanEvaluation(key: string, value: boolean, context: unknown, logger: unknown): ResolutionDetails<boolean>
  resolveStringEvaluation(key: string, value: string, context: unknown, logger: unknown): ResolutionDetails<string>
  resolveNumberEvaluation(key: string, value: number, context: unknown, logger: unknown): ResolutionDetails<number>
  resolveObjectEvaluation<T>(key: string, value: T, context: unknown, logger: unknown): ResolutionDetails<T>
}

/** flagd's in-process evaluator with the same flag (JSONLogic; `fractional` is murmur3 of flag key + targetingKey). */
const flagdCore = (): FlagdCoreLike => {
  const { FlagdCore } = require("@openfeature/flagd-core") as { FlagdCore: new() => FlagdCoreLike }
  const core = new FlagdCore()
  core.setConfigurations(JSON.stringify({
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
  }))
  return core
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} }

/** flagd-core as an OpenFeature provider (what flagd's in-process provider does per evaluation). */
const flagdProvider = (): Provider => {
  const core = flagdCore()
  return {
    metadata: { name: "flagd-core" },
    runsOn: "server",
    resolveBooleanEvaluation: (key, value, context) => Promise.resolve(core.resolveBooleanEvaluation(key, value, context, quiet)),
    resolveStringEvaluation: (key, value, context) => Promise.resolve(core.resolveStringEvaluation(key, value, context, quiet)),
    resolveNumberEvaluation: (key, value, context) => Promise.resolve(core.resolveNumberEvaluation(key, value, context, quiet)),
    resolveObjectEvaluation: (key, value, context) => Promise.resolve(core.resolveObjectEvaluation(key, value, context, quiet))
  }
}

const fwDirect: Engine = {
  name: "fw isFlagEnabled (direct, in a fiber)",
  scale: 10,
  setup: async () => {
    const registry = FlagRegistry.make({ flags: fwFlags })
    const subjects = users.map((u) =>
      ({ subject: Subject.make({ type: "user", id: u.id, tenantId: null, metadata: { internal: u.internal, plan: u.plan, country: u.country } }) })
    )
    const loop = (iterations: number) =>
      Effect.gen(function*() {
        let on = 0
        for (let i = 0; i < iterations; i++) if (yield* isFlagEnabled(subjects[i % N]!, FLAG)) on++
        return on
      }).pipe(Effect.provideService(FlagRegistry.FlagRegistry, registry))
    Effect.runSync(loop(200_000))
    return (iterations) => timed(iterations, (n) => Effect.runSync(loop(n)))
  }
}

const flagdDirect: Engine = {
  name: "flagd-core (direct)",
  scale: 10,
  setup: async () => {
    const core = flagdCore()
    const loop = (iterations: number) => {
      let on = 0
      for (let i = 0; i < iterations; i++) if (core.resolveBooleanEvaluation(FLAG, false, contexts[i % N], quiet).value) on++
      return on
    }
    loop(200_000)
    return (iterations) => timed(iterations, loop)
  }
}

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

export const run = async () => {
  const floorName = "SDK + trivial provider (the SDK's floor)"
  const all: ReadonlyArray<Engine> = [
    throughSdk(floorName, trivial),
    throughSdk("SDK + fw provider", () => new FwServerProvider(FlagRegistry.make({ flags: fwFlags }))),
    throughSdk("SDK + fw provider (usage tracked)", () => new FwServerProvider(FlagRegistry.make({ flags: fwFlags, store: "sql" }))),
    throughSdk("SDK + flagd-core provider", flagdProvider),
    fwDirect,
    flagdDirect
  ]
  const only = process.env.OF_BENCH_ONLY
  const engines = only === undefined ? all : all.filter((engine) => engine.name.includes(only))
  const runners = []
  for (const engine of engines) runners.push(await engine.setup())
  const rates: Array<Array<number>> = engines.map(() => [])
  const cpus: Array<Array<number>> = engines.map(() => [])
  const onShare: Array<number> = engines.map(() => 0)
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < runners.length; i++) {
      const iterations = ITER * engines[i]!.scale
      const { cpuNs, on, opsPerSec } = await runners[i]!(iterations)
      rates[i]!.push(opsPerSec)
      cpus[i]!.push(cpuNs)
      onShare[i] = on / iterations
    }
  }
  const medians = rates.map(median)
  const cpuMedians = cpus.map(median)
  const floor = engines.findIndex((engine) => engine.name === floorName)
  const floorNs = floor < 0 ? undefined : 1e9 / medians[floor]!
  const floorCpu = floor < 0 ? undefined : cpuMedians[floor]!
  const [os] = await Promise.all([import("node:os")])
  table(
    `OpenFeature server SDK evaluations per second (3 rules, 30 % rollout, 10,000 contexts; ${ITER.toLocaleString("en-US")} SDK calls per round, medians of ${ROUNDS} alternating rounds; load average ${os.loadavg().map((n) => n.toFixed(2)).join(" ")})`,
    engines.map((engine, i) => {
      const ns = 1e9 / medians[i]!
      return {
        engine: engine.name,
        "evals/s": perSecond(medians[i]!),
        "ns/eval": Math.round(ns),
        "on share": onShare[i]!.toFixed(4),
        "vs floor (wall)": floorNs === undefined ? "-" : `${ns >= floorNs ? "+" : ""}${((ns / floorNs - 1) * 100).toFixed(1)} %`,
        "CPU ns/eval": Math.round(cpuMedians[i]!),
        "vs floor (CPU)": floorCpu === undefined ? "-" : `${cpuMedians[i]! >= floorCpu ? "+" : ""}${((cpuMedians[i]! / floorCpu - 1) * 100).toFixed(1)} %`
      }
    })
  )
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await run()
  process.exit(0)
}
