/**
 * The memory backend: an inverted index in the process, for dev and tests (spec 2.1), and for one
 * process that declares `singleProcessMemoryIndex` (re-seeded from the tables at start).
 *
 * Written by hand rather than on MiniSearch or Orama: neither gives facets, highlights and filters
 * with our semantics together, and a flat index (postings as ascending arrays of document numbers,
 * typed-array accumulators, a deletion neighbourhood and a word trie for edit-distance expansion) answers the benchmark query in
 * well under half of MiniSearch's time (see `bench/search/`).
 */
import { Effect, Layer, Stream } from "effect"
import * as Matching from "./Matching.js"
import * as Rank from "./Rank.js"
import type { Document, Hit, IndexSpec, Query, Rebuild, Result, SearchBackendShape } from "./SearchBackend.js"
import { maxEdits, SearchBackend } from "./SearchBackend.js"
import * as Text from "./Text.js"

interface Posting {
  readonly ords: Array<number>
  readonly tfs: Array<number>
}

/** One in-memory index. */
export class MemoryIndex {
  private readonly ordOf = new Map<string, number>()
  private docs: Array<Document | undefined> = []
  private lengths: Array<number> = []
  private postings = new Map<string, Posting>()
  private vocabulary = new Text.Vocabulary()
  private live = 0
  private stamp = new Int32Array(0)
  private score = new Float64Array(0)
  /** Per document, its score before the current term (a term adds its best word's contribution). */
  private prior = new Float64Array(0)
  private epoch = 0

  constructor(readonly spec: IndexSpec) {}

  get size(): number {
    return this.live
  }

  upsert(doc: Document): void {
    this.removeOne(doc.id)
    const ord = this.docs.length
    this.docs.push(doc)
    this.ordOf.set(doc.id, ord)
    const counts = new Map<string, number>()
    let length = 0
    for (const field of Text.searchableFields(this.spec, doc)) {
      const text = Text.textOf(doc[field])
      if (text === undefined) continue
      for (const word of Text.tokenize(text)) {
        counts.set(word, (counts.get(word) ?? 0) + 1)
        length++
      }
    }
    this.lengths.push(length)
    for (const [word, tf] of counts) {
      let posting = this.postings.get(word)
      if (posting === undefined) {
        this.postings.set(word, posting = { ords: [], tfs: [] })
        this.vocabulary.add(word)
      }
      posting.ords.push(ord)
      posting.tfs.push(tf)
    }
    this.live++
  }

  removeOne(id: string): void {
    const ord = this.ordOf.get(id)
    if (ord === undefined) return
    this.ordOf.delete(id)
    this.docs[ord] = undefined
    this.live--
    // Postings keep dead numbers until they outnumber the live ones; then the index is rebuilt.
    if (this.docs.length > 1024 && this.docs.length > this.live * 2) this.compact()
  }

  private compact(): void {
    const docs = this.docs.filter((doc): doc is Document => doc !== undefined)
    this.ordOf.clear()
    this.docs = []
    this.lengths = []
    this.postings = new Map()
    this.vocabulary = new Text.Vocabulary()
    this.live = 0
    for (const doc of docs) this.upsert(doc)
  }

  all(): Array<Document> {
    return this.docs.filter((doc): doc is Document => doc !== undefined)
  }

  /** Vocabulary words within the allowed edits of `term`, with their distances. */
  private expand(term: string, fuzziness: Query["fuzziness"]): Array<readonly [string, number]> {
    const edits = maxEdits(fuzziness, term)
    if (edits === 0) return this.postings.has(term) ? [[term, 0]] : []
    return this.vocabulary.search(term, edits).filter(([word]) => this.postings.has(word))
  }

  query(query: Query): Result {
    const terms = [...new Set(Text.tokenize(query.q))]
    const accept = Matching.predicateAll(query.filters)
    const matched: Array<number> = []
    const matchedWords = new Set<string>()
    const n = this.docs.length
    if (terms.length === 0) {
      for (let ord = 0; ord < n; ord++) {
        const doc = this.docs[ord]
        if (doc !== undefined && accept(doc)) matched.push(ord)
      }
    } else {
      if (this.stamp.length < n) {
        this.stamp = new Int32Array(Math.max(n, this.stamp.length * 2, 1024))
        this.score = new Float64Array(this.stamp.length)
        this.prior = new Float64Array(this.stamp.length)
        this.epoch = 0
      }
      if (this.epoch > 2_000_000_000 - terms.length * 2) {
        this.stamp.fill(0)
        this.epoch = 0
      }
      const base = this.epoch
      this.epoch += terms.length + 1
      const stamp = this.stamp
      const score = this.score
      const prior = this.prior
      const expansions = terms.map((term) => this.expand(term, query.fuzziness))
      // Rarest term first: later terms only touch documents that matched every earlier one.
      const order = terms.map((_, i) => i).sort((a, b) => this.postingCount(expansions[a]!) - this.postingCount(expansions[b]!))
      for (let step = 0; step < order.length; step++) {
        const expansion = expansions[order[step]!]!
        if (expansion.length === 0) return { hits: [], facets: Matching.countFacets(query.facets, []), found: 0 }
        const before = base + step
        const after = base + step + 1
        const last = step === order.length - 1
        for (const [word, distance] of expansion) {
          const posting = this.postings.get(word)!
          const ords = posting.ords
          const tfs = posting.tfs
          matchedWords.add(word)
          for (let k = 0; k < ords.length; k++) {
            const ord = ords[k]!
            const s = stamp[ord]!
            const first = step === 0 ? s !== after : s === before
            // Skip a document that missed an earlier term.
            if ((!first && s !== after) || this.docs[ord] === undefined) continue
            const contribution = Rank.contribution(distance, tfs[k]!, this.lengths[ord]!)
            if (first) {
              // The document's first word for this term (and it matched every earlier term).
              prior[ord] = step === 0 ? 0 : score[ord]!
              score[ord] = prior[ord]! + contribution
              stamp[ord] = after
              if (last) matched.push(ord)
            } else if (s === after) {
              // Another of its words for this term: the term counts its best word.
              const value = prior[ord]! + contribution
              if (value > score[ord]!) score[ord] = value
            }
          }
        }
      }
    }
    // Filters, then facets over the whole matched set.
    const accepted: Array<number> = []
    const facetMaps = query.facets.map(() => new Map<string, number>())
    for (const ord of matched) {
      const doc = this.docs[ord]!
      if (terms.length > 0 && !accept(doc)) continue
      accepted.push(ord)
      if (facetMaps.length > 0) Matching.addFacets(query.facets, facetMaps, doc)
    }
    const wanted = query.offset + query.limit
    const page = terms.length === 0 ? this.byId(accepted, wanted) : this.topByScore(accepted, wanted)
    const hits: Array<Hit> = page.slice(query.offset).map((ord) => {
      const doc = this.docs[ord]!
      if (query.highlight === undefined || terms.length === 0) return { doc }
      const highlights: Record<string, string> = {}
      for (const field of query.highlight.fields) {
        const text = Text.textOf(doc[field])
        if (text === undefined || field === this.spec.tenantField) continue
        const marked = Text.highlight(text, matchedWords, query.highlight.preTag, query.highlight.postTag)
        if (marked !== undefined) highlights[field] = marked
      }
      return { doc, highlights }
    })
    const facets = Object.fromEntries(query.facets.map((field, i) => [field, Object.fromEntries(facetMaps[i]!)]))
    return { hits, facets, found: accepted.length }
  }

  private postingCount(expansion: ReadonlyArray<readonly [string, number]>): number {
    let count = 0
    for (const [word] of expansion) count += this.postings.get(word)!.ords.length
    return count
  }

  private byId(ords: Array<number>, wanted: number): Array<number> {
    const docs = this.docs
    ords.sort((a, b) => Rank.compareIds(docs[a]!.id, docs[b]!.id))
    return ords.slice(0, wanted)
  }

  /** The best `wanted` by score (ties by id, see `Rank`), with a bounded selection instead of a full sort. */
  private topByScore(ords: Array<number>, wanted: number): Array<number> {
    const score = this.score
    const docs = this.docs
    const better = (a: number, b: number) => {
      const d = score[a]! - score[b]!
      if (d !== 0) return d > 0
      return Rank.compareIds(docs[a]!.id, docs[b]!.id) < 0
    }
    if (ords.length <= wanted * 4 || wanted > 2000) {
      return ords.sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0)).slice(0, wanted)
    }
    // A min-heap of the best `wanted` seen so far (root = worst kept).
    const heap: Array<number> = []
    const worse = (i: number, j: number) => better(heap[j]!, heap[i]!)
    const swap = (i: number, j: number) => {
      const t = heap[i]!
      heap[i] = heap[j]!
      heap[j] = t
    }
    const down = (i: number) => {
      for (;;) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < heap.length && worse(l, m)) m = l
        if (r < heap.length && worse(r, m)) m = r
        if (m === i) return
        swap(i, m)
        i = m
      }
    }
    for (const ord of ords) {
      if (heap.length < wanted) {
        heap.push(ord)
        let i = heap.length - 1
        while (i > 0) {
          const p = (i - 1) >> 1
          if (!worse(i, p)) break
          swap(i, p)
          i = p
        }
      } else if (better(ord, heap[0]!)) {
        heap[0] = ord
        down(0)
      }
    }
    return heap.sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0))
  }
}

/** The memory backend over a map of indexes (one backend value per process or test). */
export const make = (): SearchBackendShape => {
  const indexes = new Map<string, MemoryIndex>()
  const specs = new Map<string, IndexSpec>()
  const indexOf = (name: string) => {
    let index = indexes.get(name)
    if (index === undefined) {
      index = new MemoryIndex(specs.get(name) ?? { index: name, tenantField: "tenantId" })
      indexes.set(name, index)
    }
    return index
  }
  return {
    name: "memory",
    durable: false,
    ensureIndex: (spec) =>
      Effect.sync(() => {
        specs.set(spec.index, spec)
        if (!indexes.has(spec.index)) indexes.set(spec.index, new MemoryIndex(spec))
      }),
    upsert: (index, docs) =>
      Effect.sync(() => {
        const target = indexOf(index)
        for (const doc of docs) target.upsert(doc)
      }),
    remove: (index, ids) =>
      Effect.sync(() => {
        const target = indexOf(index)
        for (const id of ids) target.removeOne(id)
      }),
    write: (index, ops) =>
      Effect.sync(() => {
        const target = indexOf(index)
        for (const op of ops) {
          if (op.doc === null) target.removeOne(op.id)
          else target.upsert(op.doc)
        }
        return { refused: [] }
      }),
    query: (index, query) => Effect.sync(() => indexOf(index).query(query)),
    documents: (index) => Stream.suspend(() => Stream.fromIterable(indexOf(index).all())),
    rebuild: (spec) =>
      Effect.sync((): Rebuild => {
        const fresh = new MemoryIndex(spec)
        let done = false
        return {
          upsert: (docs) => Effect.sync(() => docs.forEach((doc) => fresh.upsert(doc))),
          remove: (ids) => Effect.sync(() => ids.forEach((id) => fresh.removeOne(id))),
          swap: Effect.sync(() => {
            if (done) return
            done = true
            specs.set(spec.index, spec)
            indexes.set(spec.index, fresh)
          }),
          abort: Effect.sync(() => {
            done = true
          })
        }
      })
  }
}

/** A fresh memory backend as the `SearchBackend` service. */
export const layer: Layer.Layer<SearchBackend> = Layer.sync(SearchBackend, make)
