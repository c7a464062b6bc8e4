/**
 * The ranking of the local backends (memory, and sql on SQLite and PostgreSQL), one definition so
 * that a query answers the same page on each of them:
 *
 * - A document's score is the sum over the query's terms of the term's best contribution among
 *   the document's words that match it (within the allowed edits):
 *   `floor(weight(edits) × √(tf / length) × 2^20)`, where `weight` is 1, 0.35, 0.15 for 0, 1, 2
 *   edits, `tf` how often the word occurs in the document's searchable text and `length` how many
 *   words that text has (Lucene's classic term frequency and length norm, without corpus
 *   statistics, so no backend needs counts over other documents or other tenants).
 * - Contributions are integers, so the sum is exact in any order, in JavaScript and in SQL alike.
 * - Higher score first; equal scores by `id` in Unicode code point order (PostgreSQL's `COLLATE "C"`
 *   over UTF-8). An empty `q` scores every document 0, so it orders by `id`.
 */

/** The weight of a word by its edit distance from the query term (0, 1, 2 edits). */
export const distanceWeight: ReadonlyArray<number> = [1, 0.35, 0.15]

/** The scale of a contribution: a contribution is a whole number of 2^-20. */
export const scale = 1_048_576

/** The contribution of one word to its term's score (see the module doc). */
export const contribution = (edits: number, tf: number, length: number): number =>
  Math.floor((distanceWeight[edits] ?? 0.1) * Math.sqrt(tf / length) * scale)

/** Orders two ids by Unicode code points (JavaScript's `<` compares UTF-16 units, which differs above U+FFFF). */
export const compareIds = (a: string, b: string): number => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x === y) continue
    // Surrogates (U+D800–DFFF) encode code points above U+FFFF: they sort after U+E000–FFFF.
    if (x >= 0xd800 && y >= 0xd800) return (x >= 0xe000 ? x - 0x800 : x + 0x2000) - (y >= 0xe000 ? y - 0x800 : y + 0x2000)
    return x - y
  }
  return a.length - b.length
}
