/**
 * Search sync at production write rates (issue 37): an app served over real HTTP in its own
 * process (`syncServer.ts`: a `notes` table mirrored into one index) written through `POST /rpc`
 * (the rpc message's JSON on kept-alive connections, `rpcPoster`), for every backend: memory,
 * sql on SQLite, sql on PostgreSQL, and engineA, engineB, engineC against the fake engines of
 * `test/search/fakes` (every request validated against the vendor's OpenAPI spec) with a task
 * latency of 0 and 20 ms, and engineC with a 1 s publish delay on top. Per backend:
 * - (a) saturation: writes answered per second with 16 in flight, search on against the same app
 *   without the search plugin on the same store tier (the peer), in the order off, on, on, off
 *   (each on run followed by its drain, so the next run does not share the CPU with it); the ratio
 *   of the sums (aim ≥ 0.7), and the app process's CPU per write (off: during the run; on: from the
 *   run's start until the index has every write, the listener's work included);
 * - (b) paced at 500 writes/s: write → searchable, from the write's answer at the load generator to
 *   the moment the document is searchable (aim p99 ≤ 1 s; engineC with its 1 s publish delay
 *   ≤ 2 s). What "searchable" is: on the fakes, the moment the fake applies the document to the
 *   index it searches (after the task latency and publish delay), recorded by the fake itself in
 *   this process; on the memory and sql backends, whose index lives in the app, the moment the
 *   backend's write call returned (the memory index was updated in the call; the SQL statement had
 *   committed), recorded there on the same wall clock. A document searchable before its answer
 *   arrived counts 0;
 * - (c) a burst of 10,000 writes at saturation, then the time from its last answer until every
 *   document is searchable and the index's `backlog` (the stats view's, read every 100 ms) reads 0
 *   (aim ≤ 10 s), with the largest `backlog` and `lagMs` the view showed meanwhile.
 * The engines' stores are SQLite files (`BENCH_SEARCH_SYNC_ENGINE_STORE=pg` or `memory` to change).
 * `BENCH_SEARCH_SYNC_SMALL=1` runs a smaller size (a smoke run of about a minute);
 * `BENCH_SEARCH_SYNC_ONLY=memory,engineC+publish` only the named setups (names as in the table);
 * `BENCH_SEARCH_SYNC_PROF=<dir>` runs the apps under `node --cpu-prof` (profiles written as they exit to
 * `<dir>/<backend>-<ms>/`, `off-…` the peer's; the largest of a folder is the app's main thread;
 * summarise with `bench/profileSummary.ts`).
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { FakeServer } from "../../test/search/fakes/FakeCore.js"
import { startAlgolia } from "../../test/search/fakes/AlgoliaFake.js"
import { startMeilisearch } from "../../test/search/fakes/MeilisearchFake.js"
import { startTypesense } from "../../test/search/fakes/TypesenseFake.js"
import { processCpuMicros } from "../http/harness.js"
import { pgReachable, scratchDatabase } from "../pgDatabase.js"
import { perSecond, rpcPoster, table } from "../support.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const SMALL = process.env.BENCH_SEARCH_SYNC_SMALL === "1"
const WARM = SMALL ? 300 : 2000
const SATURATED = SMALL ? 500 : 4000
const PACED = SMALL ? 500 : 5000
const RATE = 500
const BURST = SMALL ? 1000 : 10_000
const IN_FLIGHT = 16
/** How long a drain may take before the run gives up on it. */
const DRAIN_LIMIT_MS = 180_000
const ENGINE_STORE = (process.env.BENCH_SEARCH_SYNC_ENGINE_STORE ?? "sqlite") as Store
const ONLY = process.env.BENCH_SEARCH_SYNC_ONLY?.split(",").map((name) => name.trim())
const PROF = process.env.BENCH_SEARCH_SYNC_PROF

type Store = "memory" | "sqlite" | "pg"
type Search = "memory" | "sql" | "engineA" | "engineB" | "engineC"

/** One measured setup. */
interface Setup {
  readonly name: string
  readonly store: Store
  readonly search: Search
  readonly taskLatencyMs: number
  readonly publishDelayMs: number
}

const setups: ReadonlyArray<Setup> = [
  { name: "memory", store: "memory", search: "memory", taskLatencyMs: 0, publishDelayMs: 0 },
  { name: "sql/SQLite", store: "sqlite", search: "sql", taskLatencyMs: 0, publishDelayMs: 0 },
  { name: "sql/PostgreSQL", store: "pg", search: "sql", taskLatencyMs: 0, publishDelayMs: 0 },
  ...(["engineA", "engineB", "engineC"] as const).flatMap((engine) =>
    [0, 20].map((latency) => ({ name: `${engine} ${latency}ms`, store: ENGINE_STORE, search: engine, taskLatencyMs: latency, publishDelayMs: 0 }))
  ),
  { name: "engineC+publish", store: ENGINE_STORE, search: "engineC", taskLatencyMs: 20, publishDelayMs: 1000 }
]

const wallNow = () => performance.timeOrigin + performance.now()
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A running app process. */
interface App {
  readonly url: string
  readonly cpuMicros: () => number
  readonly stop: () => Promise<void>
}

const startApp = (env: Readonly<Record<string, string>>): Promise<App> =>
  new Promise((resolve, reject) => {
    // A folder per app: its main thread and tsx's loader thread each write a profile there.
    const prof = PROF ? ["--cpu-prof", `--cpu-prof-dir=${path.join(PROF, `${env["FW_BENCH_SEARCH"]}-${Date.now()}`)}`] : []
    const child = spawn(process.execPath, [...prof, "--import", "tsx", path.join(here, "syncServer.ts")], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, ...env }
    })
    const exited = new Promise<void>((done) => child.on("exit", () => done()))
    child.stdout.on("data", (data: Buffer) => {
      const match = /PORT (\d+)/.exec(data.toString())
      if (match) {
        resolve({
          url: `http://127.0.0.1:${match[1]}`,
          cpuMicros: () => processCpuMicros(child.pid!),
          stop: () => {
            child.kill("SIGINT")
            return exited
          }
        })
      }
    })
    child.on("exit", (code) => reject(new Error(`the sync bench app exited with ${code}`)))
  })

const words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split(" ")
const saturatedPost = rpcPoster(IN_FLIGHT)
const pacedPost = rpcPoster(128)
let callId = 0

/** Writes note `id` through `POST /rpc`; fails unless the call succeeded. */
const write = async (post: ReturnType<typeof rpcPoster>, app: App, id: string, n: number) => {
  const payload = { id, title: `${words[n % words.length]} ${words[(n * 7) % words.length]} ${n}`, body: `${words[(n * 3) % words.length]} note ${n}` }
  const ok = await post(`${app.url}/rpc`, JSON.stringify({ _tag: "Request", id: String(callId++), tag: "notes.add", payload, headers: [] }))
  if (!ok) throw new Error(`notes.add ${id} failed`)
}

/** `count` writes with `IN_FLIGHT` in flight; the ids written and when the last answered. */
const saturate = async (app: App, prefix: string, count: number) => {
  const ids = Array.from({ length: count }, (_, i) => `${prefix}${i}`)
  let next = 0
  const start = performance.now()
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (next < count) {
      const i = next++
      await write(saturatedPost, app, ids[i]!, i)
    }
  }))
  const end = performance.now()
  return { ids, perSecond: count / ((end - start) / 1000), endedAt: wallNow() }
}

/** `count` writes at `RATE` per second; each id's answer time (wall clock). */
const paced = async (app: App, prefix: string, count: number) => {
  const answered = new Map<string, number>()
  const start = performance.now()
  const pending: Array<Promise<void>> = []
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / RATE
    const wait = due - performance.now()
    if (wait > 1) await sleep(wait)
    const id = `${prefix}${i}`
    pending.push(write(pacedPost, app, id, i).then(() => void answered.set(id, wallNow())))
  }
  await Promise.all(pending)
  return { answered, achieved: count / ((performance.now() - start) / 1000) }
}

/** The index's view as the stats view shows it. */
const lagOf = async (app: App) => (await (await fetch(`${app.url}/_bench/lag`)).json()) as { readonly backlog: number; readonly lagMs: number }

/** Where documents become searchable: the fake's own record, or the app's (memory and sql backends). */
interface Visibility {
  readonly at: Map<string, number>
  /** Write requests (batches) the backend got so far. */
  readonly batches: () => number
  /** Reads what the app recorded since the last call (no-op for the fakes). */
  readonly refresh: (app: App) => Promise<void>
}

const fakeVisibility = (fake: FakeServer): Visibility => {
  const at = new Map<string, number>()
  fake.knobs.onVisible = (_index, docs) => {
    const now = wallNow()
    for (const doc of docs) if (typeof doc["id"] === "string" && !at.has(doc["id"])) at.set(doc["id"], now)
  }
  const writeOperations = new Set(["importDocuments", "replace_documents", "batch"])
  return { at, refresh: () => Promise.resolve(), batches: () => fake.requests.filter((request) => writeOperations.has(request.operationId ?? "")).length }
}

const appVisibility = (): Visibility => {
  const at = new Map<string, number>()
  let from = 0
  let writes = 0
  return {
    at,
    batches: () => writes,
    refresh: async (app) => {
      const answer = (await (await fetch(`${app.url}/_bench/visible?from=${from}`)).json()) as { entries: Array<string | number>; next: number; writes: number }
      for (let i = 0; i < answer.entries.length; i += 2) if (!at.has(answer.entries[i] as string)) at.set(answer.entries[i] as string, answer.entries[i + 1] as number)
      from = answer.next
      writes = answer.writes
    }
  }
}

/**
 * Waits until every id is searchable and the view's backlog reads 0; the wall-clock moments of
 * both (the latter as polled, every 100 ms), and the largest backlog and lag read meanwhile. The
 * view is read only once every id is searchable unless `watch` (each read costs the app a few
 * queries, which would count in its CPU per write).
 */
const drain = async (app: App, visibility: Visibility, ids: ReadonlyArray<string>, watch = false) => {
  const start = performance.now()
  let missing = [...ids]
  let allVisibleAt: number | undefined
  let zeroAt: number | undefined
  let maxBacklog = 0
  let maxLagMs = 0
  while (performance.now() - start < DRAIN_LIMIT_MS) {
    await visibility.refresh(app)
    missing = missing.filter((id) => !visibility.at.has(id))
    if (missing.length === 0 && allVisibleAt === undefined) allVisibleAt = Math.max(...ids.map((id) => visibility.at.get(id)!))
    if (!watch && missing.length > 0) {
      await sleep(50)
      continue
    }
    const lag = await lagOf(app)
    maxBacklog = Math.max(maxBacklog, lag.backlog)
    maxLagMs = Math.max(maxLagMs, lag.lagMs)
    if (lag.backlog === 0 && zeroAt === undefined && missing.length === 0) zeroAt = wallNow()
    if (zeroAt !== undefined && allVisibleAt !== undefined) break
    await sleep(100)
  }
  return { allVisibleAt, zeroAt, maxBacklog, maxLagMs, missing: missing.length }
}

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN

/** The app's environment for one store tier (a fresh database each) and what to clean up after. */
const storeFor = async (store: Store) => {
  if (store === "pg") {
    const database = await scratchDatabase("search_sync")
    return { env: { FW_BENCH_STORE: "pg", FW_BENCH_DB: database.url }, drop: database.drop }
  }
  if (store === "sqlite") {
    const dir = mkdtempSync(path.join(tmpdir(), "fw-bench-search-sync-"))
    return { env: { FW_BENCH_STORE: "sqlite", FW_BENCH_DB: path.join(dir, "app.db") }, drop: async () => rmSync(dir, { recursive: true, force: true }) }
  }
  return { env: { FW_BENCH_STORE: "memory" }, drop: async () => undefined }
}

const startFake = async (setup: Setup): Promise<FakeServer | undefined> => {
  const fake = setup.search === "engineA" ? await startTypesense() : setup.search === "engineB" ? await startMeilisearch() : setup.search === "engineC" ? await startAlgolia() : undefined
  if (fake) {
    fake.knobs.taskLatencyMs = setup.taskLatencyMs
    fake.knobs.publishDelayMs = setup.publishDelayMs
  }
  return fake
}

/** The figures of one setup. */
interface Figures {
  readonly offPerSecond: number
  readonly onPerSecond: number
  readonly offCpu: number
  readonly onCpu: number
  readonly p50: number
  readonly p99: number
  readonly beforeAnswer: number
  readonly achievedRate: number
  readonly burstWriteS: number
  readonly drainS: number
  readonly backlogZeroS: number
  readonly maxBacklog: number
  readonly maxLagMs: number
  readonly violations: number
  /** Documents per backend write request (batch), at saturation and in the burst. */
  readonly perBatchSaturated: number
  readonly perBatchBurst: number
}

const measure = async (setup: Setup): Promise<Figures> => {
  const began = performance.now()
  const phase = (name: string) => console.log(`search sync: ${setup.name}: ${name} at ${((performance.now() - began) / 1000).toFixed(1)} s`)
  const offStore = await storeFor(setup.store)
  const onStore = await storeFor(setup.store)
  const fake = await startFake(setup)
  const off = await startApp({ ...offStore.env, FW_BENCH_SEARCH: "off" })
  const on = await startApp({ ...onStore.env, FW_BENCH_SEARCH: setup.search, FW_BENCH_ENGINE_URL: fake?.url ?? "" })
  const visibility = fake ? fakeVisibility(fake) : appVisibility()
  try {
    // Warm both apps up (the JIT, the connections, the index's creation).
    await saturate(off, "w", WARM)
    const warm = await saturate(on, "w", WARM)
    const warmed = await drain(on, visibility, warm.ids)
    if (warmed.missing > 0) throw new Error(`${setup.name}: ${warmed.missing} warm-up writes never became searchable`)
    phase("warmed up")
    // (a) saturation, off on on off.
    const offRun = async (prefix: string) => {
      const cpu = off.cpuMicros()
      const run = await saturate(off, prefix, SATURATED)
      return { perSecond: run.perSecond, cpu: (off.cpuMicros() - cpu) / SATURATED }
    }
    const onRun = async (prefix: string) => {
      const cpu = on.cpuMicros()
      const batches = visibility.batches()
      const run = await saturate(on, prefix, SATURATED)
      const drained = await drain(on, visibility, run.ids)
      if (drained.missing > 0) throw new Error(`${setup.name}: ${drained.missing} writes never became searchable`)
      return { perSecond: run.perSecond, cpu: (on.cpuMicros() - cpu) / SATURATED, perBatch: SATURATED / (visibility.batches() - batches) }
    }
    const off1 = await offRun("a")
    const on1 = await onRun("a")
    const on2 = await onRun("b")
    const off2 = await offRun("b")
    phase("saturation runs done")
    // (b) paced.
    const pacedRun = await paced(on, "p", PACED)
    const pacedDrain = await drain(on, visibility, [...pacedRun.answered.keys()])
    const fromAnswer: Array<number> = []
    let beforeAnswer = 0
    for (const [id, answeredAt] of pacedRun.answered) {
      const visibleAt = visibility.at.get(id)
      if (visibleAt === undefined) continue
      if (visibleAt < answeredAt) beforeAnswer++
      fromAnswer.push(Math.max(0, visibleAt - answeredAt))
    }
    fromAnswer.sort((a, b) => a - b)
    if (pacedDrain.missing > 0) throw new Error(`${setup.name}: ${pacedDrain.missing} paced writes never became searchable`)
    // (c) burst.
    phase("paced run done")
    // The view read every 200 ms during the burst too, as an operator's dashboard would.
    let watching = true
    const seen = { backlog: 0, lagMs: 0 }
    const watcher = (async () => {
      while (watching) {
        const lag = await lagOf(on)
        seen.backlog = Math.max(seen.backlog, lag.backlog)
        seen.lagMs = Math.max(seen.lagMs, lag.lagMs)
        await sleep(200)
      }
    })()
    const burstBatches = visibility.batches()
    const burstStart = wallNow()
    const burst = await saturate(on, "c", BURST)
    const burstDrain = await drain(on, visibility, burst.ids, true)
    watching = false
    await watcher
    return {
      offPerSecond: (off1.perSecond + off2.perSecond) / 2,
      onPerSecond: (on1.perSecond + on2.perSecond) / 2,
      offCpu: Math.min(off1.cpu, off2.cpu),
      onCpu: Math.min(on1.cpu, on2.cpu),
      p50: quantile(fromAnswer, 0.5),
      p99: quantile(fromAnswer, 0.99),
      beforeAnswer,
      achievedRate: pacedRun.achieved,
      burstWriteS: (burst.endedAt - burstStart) / 1000,
      drainS: burstDrain.allVisibleAt === undefined ? Infinity : Math.max(0, burstDrain.allVisibleAt - burst.endedAt) / 1000,
      backlogZeroS: burstDrain.zeroAt === undefined ? Infinity : (burstDrain.zeroAt - burst.endedAt) / 1000,
      maxBacklog: Math.max(seen.backlog, burstDrain.maxBacklog),
      maxLagMs: Math.max(seen.lagMs, burstDrain.maxLagMs),
      violations: fake?.violations.length ?? 0,
      perBatchSaturated: (on1.perBatch + on2.perBatch) / 2,
      perBatchBurst: BURST / (visibility.batches() - burstBatches)
    }
  } finally {
    await Promise.all([off.stop(), on.stop()])
    await fake?.close()
    await offStore.drop()
    await onStore.drop()
  }
}

const mark = (ok: boolean) => (ok ? "" : " MISS")
const seconds = (s: number) => (Number.isFinite(s) ? `${s.toFixed(2)} s` : `> ${DRAIN_LIMIT_MS / 1000} s`)

export const run = async () => {
  const pg = await pgReachable()
  const chosen = setups.filter((setup) => (ONLY === undefined || ONLY.includes(setup.name)) && (pg || (setup.store !== "pg")))
  if (!pg) console.log("search sync: PostgreSQL not reachable, its setups skipped")
  const rows: Array<Record<string, string>> = []
  for (const setup of chosen) {
    const f = await measure(setup)
    const ratio = f.onPerSecond / f.offPerSecond
    const latencyAim = setup.publishDelayMs > 0 ? 1000 + setup.publishDelayMs : 1000
    rows.push({
      setup: setup.name,
      "writes/s off": perSecond(f.offPerSecond),
      "writes/s on": perSecond(f.onPerSecond),
      "ratio (≥0.7)": ratio.toFixed(2) + mark(ratio >= 0.7),
      "CPU µs/write off/on": `${f.offCpu.toFixed(0)}/${f.onCpu.toFixed(0)}`,
      [`p50/p99 ms @${RATE}/s (p99≤1 s; +publish)`]: `${f.p50.toFixed(0)}/${f.p99.toFixed(0)}${mark(f.p99 <= latencyAim)}`,
      "achieved/s": f.achievedRate.toFixed(0),
      [`burst ${BURST / 1000}k: writes`]: seconds(f.burstWriteS),
      "then searchable (≤10 s)": seconds(f.drainS) + mark(f.drainS <= 10),
      "backlog 0 read": seconds(f.backlogZeroS),
      "max backlog/lagMs seen": `${f.maxBacklog}/${f.maxLagMs}`,
      "docs/batch sat/burst": `${f.perBatchSaturated.toFixed(1)}/${f.perBatchBurst.toFixed(1)}`,
      "spec violations": String(f.violations)
    })
    console.log(`search sync: ${setup.name} done (${JSON.stringify(rows[rows.length - 1])})`)
  }
  table(
    `search sync over POST /rpc (app in its own process; ${IN_FLIGHT} in flight at saturation; engine stores ${ENGINE_STORE}; ` +
      `saturation ${SATURATED.toLocaleString("en-US")} writes × 2 each way, paced ${PACED.toLocaleString("en-US")} at ${RATE}/s, burst ${BURST.toLocaleString("en-US")})\n` +
      `write → searchable: from the write's answer to the document being searchable (fakes: when the fake applied it; memory/sql: when the backend's write returned)`,
    rows
  )
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
