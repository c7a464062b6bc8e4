/**
 * Text handling shared by the in-process backends: folding, tokenising, edit distance, and
 * highlighting with HTML escaping (the semantics of `SearchBackend.ts`).
 */
import type { Document, IndexSpec } from "./SearchBackend.js"

const marks = /\p{M}+/gu
const wordChars = /[\p{L}\p{N}]+/gu
const rawWordChars = /[\p{L}\p{N}\p{M}]+/gu

/** Lower-cases and strips diacritics. */
export const fold = (text: string): string =>
  ascii.test(text) ? text.toLowerCase() : text.normalize("NFKD").replace(marks, "").toLowerCase()

const ascii = /^[\x00-\x7f]*$/

/** The folded words of a text. */
export const tokenize = (text: string): Array<string> => fold(text).match(wordChars) ?? []

/** The text of a searchable value: a string, or the strings of a list joined with ", ". */
export const textOf = (value: unknown): string | undefined => {
  if (typeof value === "string") return value
  if (Array.isArray(value)) {
    const strings = value.filter((item): item is string => typeof item === "string")
    return strings.length > 0 ? strings.join(", ") : undefined
  }
  return undefined
}

/** The fields of `doc` searched by `q` under `spec`. */
export const searchableFields = (spec: IndexSpec, doc: Document): ReadonlyArray<string> =>
  spec.searchableFields ??
    Object.keys(doc).filter((field) => field !== "id" && field !== spec.tenantField && textOf(doc[field]) !== undefined)

/**
 * Levenshtein distance of `a` and `b` if it is at most `max`, else `max + 1` (stops early).
 */
export const boundedDistance = (a: string, b: string, max: number): number => {
  if (Math.abs(a.length - b.length) > max) return max + 1
  if (a === b) return 0
  let previous = new Array<number>(b.length + 1)
  let current = new Array<number>(b.length + 1)
  for (let j = 0; j <= b.length; j++) previous[j] = j
  for (let i = 1; i <= a.length; i++) {
    current[0] = i
    let rowMin = i
    for (let j = 1; j <= b.length; j++) {
      const cost = a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1
      const value = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
      current[j] = value
      if (value < rowMin) rowMin = value
    }
    if (rowMin > max) return max + 1
    const swap = previous
    previous = current
    current = swap
  }
  return previous[b.length]! <= max ? previous[b.length]! : max + 1
}

const escapes: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }

/** Escapes text for HTML. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => escapes[c]!)

/**
 * The highlighted text: HTML-escaped, with every word whose folded form is in `matched` wrapped in
 * the caller's tags. Undefined when no word matched.
 */
export const highlight = (text: string, matched: ReadonlySet<string>, preTag: string, postTag: string): string | undefined => {
  let out = ""
  let last = 0
  let any = false
  for (const match of text.matchAll(rawWordChars)) {
    const word = match[0]
    const folded = fold(word)
    // A word that folds into several tokens (rare) is matched on its parts.
    const hit = matched.has(folded) || (folded.match(wordChars) ?? []).some((part) => matched.has(part))
    if (!hit) continue
    any = true
    out += escapeHtml(text.slice(last, match.index)) + preTag + escapeHtml(word) + postTag
    last = match.index + word.length
  }
  if (!any) return undefined
  return out + escapeHtml(text.slice(last))
}

/**
 * A trie of words, searched within an edit distance (a Levenshtein automaton walk). The rows of the
 * distance table are preallocated per depth, so a search allocates nothing but its answer.
 */
export class WordTrie {
  private readonly root: TrieNode = { children: new Map(), word: undefined }
  private depth = 0

  add(word: string): void {
    let node = this.root
    let depth = 0
    for (let i = 0; i < word.length; i++) {
      const code = word.charCodeAt(i)
      let next = node.children.get(code)
      if (next === undefined) node.children.set(code, next = { children: new Map(), word: undefined })
      node = next
      depth++
    }
    node.word = word
    if (depth > this.depth) this.depth = depth
  }

  /** Every stored word within `max` edits of `term`, with its distance. */
  search(term: string, max: number): Array<readonly [string, number]> {
    const n = term.length
    const codes = new Int32Array(n)
    for (let i = 0; i < n; i++) codes[i] = term.charCodeAt(i)
    const rows: Array<Int32Array> = []
    const levels = Math.min(this.depth, n + max) + 1
    for (let d = 0; d <= levels; d++) rows.push(new Int32Array(n + 1))
    const first = rows[0]!
    for (let j = 0; j <= n; j++) first[j] = j
    const found: Array<readonly [string, number]> = []
    if (this.root.word !== undefined && n <= max) found.push([this.root.word, n])
    const walk = (node: TrieNode, code: number, depth: number) => {
      const previous = rows[depth - 1]!
      const row = rows[depth]!
      row[0] = depth
      let rowMin = depth
      for (let j = 1; j <= n; j++) {
        const a = row[j - 1]! + 1
        const b = previous[j]! + 1
        const c = previous[j - 1]! + (codes[j - 1] === code ? 0 : 1)
        const value = a < b ? (a < c ? a : c) : (b < c ? b : c)
        row[j] = value
        if (value < rowMin) rowMin = value
      }
      if (node.word !== undefined && row[n]! <= max) found.push([node.word, row[n]!])
      if (rowMin <= max && depth < levels) for (const [next, child] of node.children) walk(child, next, depth + 1)
    }
    for (const [code, child] of this.root.children) walk(child, code, 1)
    return found
  }
}

interface TrieNode {
  readonly children: Map<number, TrieNode>
  word: string | undefined
}

/**
 * The vocabulary of an index, searched within an edit distance: one edit through a deletion
 * neighbourhood (every word and its one-letter deletions, as SymSpell does: a handful of map
 * lookups per term), two edits through the trie. Both structures are built on the first search
 * that needs them and kept up to date after, so a write-only index never pays for them.
 */
export class Vocabulary {
  private readonly words: Array<string> = []
  private trie: WordTrie | undefined
  private deletions: Map<string, Array<string> | string> | undefined

  add(word: string): void {
    this.words.push(word)
    this.trie?.add(word)
    if (this.deletions !== undefined) this.linkAll(this.deletions, word)
  }

  private linkAll(deletions: Map<string, Array<string> | string>, word: string): void {
    link(deletions, word, word)
    // A one-letter word links the empty variant too: a one-letter term reaches it by a substitution.
    for (let i = 0; i < word.length; i++) {
      const variant = word.slice(0, i) + word.slice(i + 1)
      if (i > 0 && word[i] === word[i - 1]) continue
      link(deletions, variant, word)
    }
  }

  /** Every word within `max` edits of `term`, with its distance. */
  search(term: string, max: number): Array<readonly [string, number]> {
    if (max >= 2) {
      if (this.trie === undefined) {
        this.trie = new WordTrie()
        for (const word of this.words) this.trie.add(word)
      }
      return this.trie.search(term, max)
    }
    if (this.deletions === undefined) {
      this.deletions = new Map()
      for (const word of this.words) this.linkAll(this.deletions, word)
    }
    const deletions = this.deletions
    const found = new Map<string, number>()
    const consider = (variant: string) => {
      const words = deletions.get(variant)
      if (words === undefined) return
      for (const word of typeof words === "string" ? [words] : words) {
        if (found.has(word)) continue
        const distance = boundedDistance(term, word, max)
        if (distance <= max) found.set(word, distance)
      }
    }
    consider(term)
    if (max === 1) for (let i = 0; i < term.length; i++) consider(term.slice(0, i) + term.slice(i + 1))
    return [...found]
  }
}

const link = (deletions: Map<string, Array<string> | string>, variant: string, word: string): void => {
  const existing = deletions.get(variant)
  if (existing === undefined) deletions.set(variant, word)
  else if (typeof existing === "string") {
    if (existing !== word) deletions.set(variant, [existing, word])
  } else if (!existing.includes(word)) existing.push(word)
}
