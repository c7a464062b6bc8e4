/**
 * Memory backend against MiniSearch, same run, same documents: 100,000 documents (a tenant field and
 * ~24 Zipf-distributed words each), a two-term query with fuzziness 1. Ours also applies a tenant
 * filter and counts two facets; MiniSearch filters by tenant in its callback and counts no facets
 * (it has none), and still sets the bar. Reports query p50/p95, build time and heap.
 * `BENCH_SEARCH_DOCS` shrinks the corpus while developing.
 */
import { Effect } from "effect"
import MiniSearch from "minisearch"
import * as Memory from "../../src/search/Memory.js"
import type { Document } from "../../src/search/SearchBackend.js"
import { table } from "../support.js"

const N = Number(process.env.BENCH_SEARCH_DOCS ?? 100_000)
const QUERIES = 200
const VOCABULARY = 20_000
const TENANTS = 10

/** A small deterministic generator (mulberry32). */
const random = (seed: number) => () => {
  seed |= 0
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** Builds the corpus: words of 3–10 letters, drawn with Zipf(1) frequencies. */
export const corpus = (n: number, seed = 42) => {
  const rand = random(seed)
  const letters = "abcdefghijklmnopqrstuvwxyz"
  const words = new Set<string>()
  while (words.size < VOCABULARY) {
    const length = 3 + Math.floor(rand() * 8)
    let word = ""
    for (let i = 0; i < length; i++) word += letters[Math.floor(rand() * 26)]
    words.add(word)
  }
  const vocabulary = [...words]
  const cumulative: Array<number> = []
  let sum = 0
  for (let rank = 1; rank <= VOCABULARY; rank++) cumulative.push(sum += 1 / rank)
  const draw = () => {
    const x = rand() * sum
    let lo = 0
    let hi = cumulative.length - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cumulative[mid]! < x) lo = mid + 1
      else hi = mid
    }
    return vocabulary[lo]!
  }
  const brands = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka"]
  const docs: Array<Document> = []
  for (let i = 0; i < n; i++) {
    const body: Array<string> = []
    const count = 20 + Math.floor(rand() * 9)
    for (let w = 0; w < count; w++) body.push(draw())
    docs.push({
      id: `d${i}`,
      tenantId: `t${i % TENANTS}`,
      title: body.slice(0, 4).join(" "),
      body: body.slice(4).join(" "),
      brand: brands[Math.floor(rand() * brands.length)]!,
      year: 2015 + Math.floor(rand() * 10)
    })
  }
  // Query pairs among mid-frequency words (ranks 20–400), so each query has real work and real hits.
  const queries: Array<readonly [string, string]> = []
  for (let i = 0; i < QUERIES * 2; i++) {
    queries.push([vocabulary[20 + Math.floor(rand() * 380)]!, vocabulary[20 + Math.floor(rand() * 380)]!])
  }
  return { docs, queries }
}

const percentile = (samples: Array<number>, p: number) => {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!
}

const heapMb = () => {
  globalThis.gc?.()
  return process.memoryUsage().heapUsed / 1e6
}

export const run = async () => {
  const { docs, queries } = corpus(N)
  const before = heapMb()

  let start = performance.now()
  const backend = Memory.make()
  const spec = { index: "bench", tenantField: "tenantId", searchableFields: ["title", "body"] }
  Effect.runSync(backend.ensureIndex!(spec))
  Effect.runSync(backend.upsert("bench", docs))
  const oursBuild = performance.now() - start
  const oursHeap = heapMb() - before

  start = performance.now()
  const mini = new MiniSearch<Document>({ fields: ["title", "body"], storeFields: ["tenantId"], idField: "id" })
  mini.addAll(docs)
  const miniBuild = performance.now() - start
  const miniHeap = heapMb() - before - oursHeap

  const ours: Array<number> = []
  const theirs: Array<number> = []
  let oursHits = 0
  let theirHits = 0
  // The first half warms both up; the second half, other queries, is measured.
  for (let round = 0; round < 2; round++) {
    for (const [i, [a, b]] of queries.slice(round * QUERIES, (round + 1) * QUERIES).entries()) {
      const tenant = `t${i % TENANTS}`
      let t0 = performance.now()
      const result = Effect.runSync(backend.query("bench", {
        q: `${a} ${b}`,
        limit: 20,
        offset: 0,
        fuzziness: 1,
        filters: [{ field: "tenantId", op: "eq", value: tenant }],
        facets: ["brand", "year"],
        engineParams: {}
      }))
      const t1 = performance.now()
      const found = mini.search(`${a} ${b}`, { fuzzy: 1, combineWith: "AND", filter: (r) => r["tenantId"] === tenant })
      const t2 = performance.now()
      if (round === 1) {
        ours.push(t1 - t0)
        theirs.push(t2 - t1)
        oursHits += result.found
        theirHits += found.length
      }
      t0 = t2
    }
  }
  const oursP50 = percentile(ours, 0.5)
  const miniP50 = percentile(theirs, 0.5)
  table(`search memory backend vs MiniSearch 7.2.0, ${N.toLocaleString("en-US")} docs, 2-term fuzzy(1) query + tenant filter (+2 facets for ours)`, [
    { engine: "fw memory", "p50 ms": oursP50.toFixed(2), "p95 ms": percentile(ours, 0.95).toFixed(2), "build s": (oursBuild / 1000).toFixed(2), "heap MB": oursHeap.toFixed(0), "hits/query": Math.round(oursHits / ours.length) },
    { engine: "MiniSearch", "p50 ms": miniP50.toFixed(2), "p95 ms": percentile(theirs, 0.95).toFixed(2), "build s": (miniBuild / 1000).toFixed(2), "heap MB": miniHeap.toFixed(0), "hits/query": Math.round(theirHits / theirs.length) },
    { engine: "ratio fw/MiniSearch", "p50 ms": (oursP50 / miniP50).toFixed(2), "p95 ms": "", "build s": (oursBuild / miniBuild).toFixed(2), "heap MB": (oursHeap / miniHeap).toFixed(2), "hits/query": "" }
  ])
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
